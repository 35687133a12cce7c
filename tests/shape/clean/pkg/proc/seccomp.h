int proc_filter_install(void);
