int proc_confine_enter(void);
