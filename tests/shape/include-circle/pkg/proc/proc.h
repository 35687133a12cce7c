int proc_spawn(void);
