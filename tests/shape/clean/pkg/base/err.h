/* err.h: a fixture's bottom package. */
int base_err_code(void);
