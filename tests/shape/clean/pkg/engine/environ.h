int engine_environ_set(void);
