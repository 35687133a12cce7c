/* text.h: text from a cell or a server made fit for one line of check's
 * report, and the columns of its table. Pure. */
#ifndef APPL_CHECK_TEXT_H
#define APPL_CHECK_TEXT_H

#include <stddef.h>

#define CHECK_TEXT_ELLIPSIS "\xe2\x80\xa6" /* … */

/* s[0..len) (any bytes) escaped into out (cap > 0) as log_escape does, so
 * hostile text cannot forge lines or reorder the terminal's; an ellipsis
 * ends it when it had to be cut and there is room for one. */
void check_text_show(const char *s, size_t len, char *out, size_t cap);

/* The characters of UTF-8 text s (its bytes that do not continue one). */
size_t check_text_cols(const char *s);

/* s cut to cols (> 0) characters, the last an ellipsis when cut, into
 * out (cap bytes, room for s). */
void check_text_cut(const char *s, size_t cols, char *out, size_t cap);

#endif
