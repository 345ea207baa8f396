/*
 * macros.c - preprocessor-heavy code with line continuations.
 * Nothing here is meant to compile cleanly on its own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX(a, b) \
    ((a) > (b) ? (a) : (b))

#define MIN(a, b)   \
    ((a) < (b) ?    \
     (a) : (b))

#define SWAP(type, x, y) do { \
        type tmp_ = (x);      \
        (x) = (y);            \
        (y) = tmp_;           \
    } while (0)

#define STRINGIFY(x) #x
#define CONCAT(a, b) a ## b
#define LOG(fmt, ...) fprintf(stderr, "[log] " fmt "\n", \
                              ##__VA_ARGS__)

/* A macro whose body contains a comment: the comment spans the continuation */
#define WEIRD(x) /* start \
  still comment */ (x + 1)

// A line comment that continues onto the next line \
   because of the trailing backslash, so this is still comment
int after_continued_comment = 1;

#define MESSAGE "a string with a continuation \
inside it"

#define EMPTY
#define ONE 1
#if defined(ONE) && ONE > 0 \
    && !defined(TWO)
static const int configured = ONE;
#else
static const int configured = 0;
#endif

/\
* split comment opener *\
/ int split_ok = 2;

in\
t spliced_identifier = 0x1F\
u;

static int table[] = {
    MAX(1, 2), MIN(3, 4), CONCAT(1, 0),
    0x7fffffff, 017, 1e10 > 0, 'a', '\n',
};

int use_macros(int argc, char **argv)
{
    int a = argc, b = 3;
    SWAP(int, a, b);
    LOG("a=%d b=%d", a, b);
    LOG("done");
    printf("%s\n", STRINGIFY(hello world));
    printf("%s\n", MESSAGE);
    return WEIRD(a) + table[0] + configured + split_ok + spliced_identifier
        + after_continued_comment + (argv != NULL);
}

/* ends with a backslash-newline at end of file */
#define TRAILING 1 \
