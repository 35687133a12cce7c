int base_err_code(void);
