/* crlf.c - Windows line endings (CR LF) throughout */
#include <windows.h>

#define CHECK(expr) \
    do { if (!(expr)) { \
        fputs("check failed: " #expr "\r\n", stderr); \
    } } while (0)

// a line comment ending in CR LF
int WINAPI wWinMain(HINSTANCE h, HINSTANCE p, PWSTR cmd, int show)
{
    const char *path = "C:\\Windows\\System32\\";  // backslashes in a string
    const char *split = "first half \
second half";
    char sep = '\\';
    CHECK(h != NULL); /* block comment
    spanning CR LF lines */
    return 0;
}
int lone_cr = 1; int after_cr = 2;
char *bs_cr = "x\y";
