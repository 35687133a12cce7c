/* Belongs to no file: includes alone show no circle. */
int image_a_one(int n);
int image_b_two(int n);
