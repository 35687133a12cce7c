int schema_a(int n);
int schema_b(int n);
int schema_c(int n);
