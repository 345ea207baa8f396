// strings.c - literals that contain comment markers and quotes.
#include <stdio.h>

static const char *urls[] = {
    "http://example.com/path",          // a URL is not a comment
    "https://example.org/*not a comment*/",
    "/* still a string */",
    "// also a string",
    "\"/* escaped quote then comment marker */\"",
    "tab\there", "newline\n", "backslash\\", "quote\"", "end",
};

static const char quote = '\'';
static const char dquote = '"';
static const char slash = '/';
static const char star = '*';
static const char backslash = '\\';
static const char multi[] = { '/', '*', '/', '/', '*', '/' };
static const int wide = L'x' + u'y' + U'z';
static const char *prefixed = u8"utf-8 literal: \u00e9" L"wide" "adjacent" "strings";

/* a comment with "a string" and 'c' inside it */
int count_slashes(const char *s)
{
    int n = 0;
    while (*s) {
        if (*s == '/' && s[1] == '*') /* opener in a char literal */ n++;
        if (*s == '/' && s[1] == '/') n++; // line comment after code
        s++;
    }
    return n;
}

void print_all(void)
{
    for (unsigned i = 0; i < sizeof urls / sizeof *urls; i++)
        printf("%u: %s\n", i, urls[i]);
    printf("%c%c%c%c%c\n", quote, dquote, slash, star, backslash);
    printf("a/b = %d\n", 6/3);
    printf("pointer deref: %d\n", *&*&(int){7});
    int x = 10, *p = &x;
    int y = x/ *p;  /* division by a dereference, not a comment */
    printf("%d %s\n", y, prefixed);
    printf("unbalanced 'quote\" inside a string\n");
    printf("string with escaped backslash at end \\");
    printf("\x41\102\u0043 octal and hex escapes");
    putchar('\x7f');
    putchar('\0');
}

const char *emoji = "snowman ☃ and ünïcödé in a string";
// comment with UTF-8: ñandú — “quotes” and a stray " and '
char lone = '\"';
