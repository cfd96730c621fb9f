#include "core/utf8.h"

int sp_utf8_length(const unsigned char *s)
{
    int n = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || (n == 2 && s[0] < 0xC2) || (n == 4 && s[0] > 0xF4))
        return 0; /* stray continuation, overlong 2-byte form, beyond U+10FFFF */
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if (n == 3 && ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0)))
        return 0; /* overlong, or a UTF-16 surrogate */
    if (n == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90)))
        return 0;
    return n;
}
