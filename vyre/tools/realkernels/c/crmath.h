/* Correctly rounded binary32 expf, logf and powf for the real-kernel suite's C drivers, so
 * that their outputs are what vyre's exact functions (docs/IR.md, "Exact functions") must
 * give. glibc's expf, logf and powf are not guaranteed correctly rounded; these are.
 *
 * How: the function is evaluated in double (glibc's exp, log and pow err by less than one
 * double ulp, 2^-52 relative) and rounded once to float. That rounding is the correctly
 * rounded result unless the double value lies within its error of a float rounding
 * boundary; so the value is widened by CR_WINDOW_DOUBLE (2^-48 relative: 16 times the
 * error) both ways, and if both ends round to the same float that float is the answer. If
 * not (about one argument in 2^23), it is redone in long double (x87, 64-bit significand;
 * glibc's expl, logl, powl within a few ulp of that, 2^-62) with CR_WINDOW_LONG (2^-58).
 * If that cannot decide either, the value lies within 2^-58 of a boundary: exp and log of a
 * float other than 0 and 1 are transcendental (Lindemann), so they are never on one, but
 * pow can be exactly on a midpoint (pow(4225, 2) = 17850625 needs 25 bits); cr_powf then
 * checks in integers whether |x|^y is exactly that midpoint (y = p / 2^k: the odd parts
 * and exponents of m^(2^k) and x^p) and if so rounds it to even. Anything else stops the
 * driver with a message naming the call: it never writes a result it is not sure of. NaN,
 * infinities and zeros pass through the double result unchanged (C99 Annex F in glibc's
 * double functions, the same as for float).
 * tests/test_crmath_shim.py checks these against vyre.tools.function_oracle (Python's
 * decimal) on the special values, on arguments whose double value lies nearest a boundary
 * and on random ones, and that an undecidable call stops the driver.
 *
 * CR_WIDE_CALLS counts the calls that needed long double (the check driver prints it). */
#ifndef REALKERNELS_CRMATH_H
#define REALKERNELS_CRMATH_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef CR_WINDOW_DOUBLE
#define CR_WINDOW_DOUBLE 0x1p-48
#endif
#ifndef CR_WINDOW_LONG
#define CR_WINDOW_LONG 0x1p-58L
#endif

static unsigned long CR_WIDE_CALLS;

/* 1 and *out = the float w rounds to if every value within `window` (relative) of w rounds
 * to it; 0 if w is too near a boundary to tell. Zeros, infinities and NaN are exact. */
static inline int cr_decide(long double w, long double window, float *out) {
    if (w == 0 || isinf(w) || isnan(w)) {
        *out = (float)w;
        return 1;
    }
    long double slack = fabsl(w) * window;
    float lo = (float)(w - slack), hi = (float)(w + slack);
    if (lo != hi) return 0;
    *out = lo;
    return 1;
}

static inline void cr_undecided(const char *fn, float x, float y, int two) {
    if (two)
        fprintf(stderr, "crmath: %s(%a, %a) lies too near a float rounding boundary to round "
                "it correctly from long double; not writing a result\n", fn, x, y);
    else
        fprintf(stderr, "crmath: %s(%a) lies too near a float rounding boundary to round it "
                "correctly from long double; not writing a result\n", fn, x);
    exit(3);
}

/* a one-argument function: `d` in double, else `l` in long double, else stop */
static inline float cr_one(const char *fn, double (*d)(double), long double (*l)(long double),
                           float x) {
    float r;
    if (cr_decide(d((double)x), CR_WINDOW_DOUBLE, &r)) return r;
    CR_WIDE_CALLS++;
    if (cr_decide(l((long double)x), CR_WINDOW_LONG, &r)) return r;
    cr_undecided(fn, x, 0, 0);
    return 0;
}

static inline float cr_expf(float x) { return cr_one("expf", exp, expl, x); }
static inline float cr_logf(float x) { return cr_one("logf", log, logl, x); }

/* v > 0 (a double) as odd * 2^e */
static inline void cr_odd(double v, uint64_t *odd, int *e) {
    int ev;
    uint64_t n = (uint64_t)ldexp(frexp(v, &ev), 53);
    ev -= 53;
    while (!(n & 1)) { n >>= 1; ev++; }
    *odd = n;
    *e = ev;
}

/* b^n in *out; 0 if it reaches 2^127 */
static inline int cr_ipow(uint64_t b, uint64_t n, unsigned __int128 *out) {
    unsigned __int128 r = 1;
    for (uint64_t i = 0; i < n; i++) {
        if (b > 1 && r > ((unsigned __int128)1 << 127) / b) return 0;
        r *= b;
    }
    *out = r;
    return 1;
}

/* 1 if |x|^y equals m (> 0) exactly, 0 if not, -1 if it cannot be told here. With
 * y = p / 2^k (p an integer, k >= 0) and x, m = odd * 2^e: x^y = m iff
 * m^(2^k) = x^p, i.e. equal odd parts and exponents. */
static inline int cr_pow_is_exactly(float x, float y, double m) {
    uint64_t X, Y, M;
    int ex, ey, em;
    cr_odd(fabs((double)x), &X, &ex);
    cr_odd(fabs((double)y), &Y, &ey);
    cr_odd(m, &M, &em);
    if (ey < -3 || ey > 40) return -1; /* k > 3, or p beyond 2^64: not handled */
    uint64_t k = ey < 0 ? (uint64_t)-ey : 0, p = ey < 0 ? Y : Y << ey;
    int negative = y < 0;
    /* exponents: em * 2^k == ex * (+-p) */
    if ((long long)em * (1LL << k) != (long long)ex * (negative ? -(long long)p : (long long)p))
        return 0;
    if (negative) return M == 1 && X == 1; /* m^(2^k) x^p = 1 */
    unsigned __int128 lhs, rhs;
    int ok_l = cr_ipow(M, 1ULL << k, &lhs), ok_r = X == 1 ? (rhs = 1, 1) : cr_ipow(X, p, &rhs);
    if (ok_l && ok_r) return lhs == rhs;
    if (ok_l != ok_r) return 0; /* one side below 2^127, the other not */
    return -1;
}

static inline float cr_powf(float x, float y) {
    float r;
    if (cr_decide(pow((double)x, (double)y), CR_WINDOW_DOUBLE, &r)) return r;
    CR_WIDE_CALLS++;
    long double w = powl((long double)x, (long double)y);
    if (cr_decide(w, CR_WINDOW_LONG, &r)) return r;
    /* within 2^-58 of a boundary: exactly on the midpoint of two neighbouring floats? */
    long double slack = fabsl(w) * CR_WINDOW_LONG;
    float lo = (float)(w - slack), hi = (float)(w + slack);
    if (isfinite(lo) && isfinite(hi) && nextafterf(lo, hi) == hi) {
        double m = ((double)lo + (double)hi) / 2; /* exact: two neighbouring floats */
        if (m != 0 && cr_pow_is_exactly(x, y, fabs(m)) == 1)
            return (float)m; /* a tie: to even */
    }
    cr_undecided("powf", x, y, 1);
    return 0;
}
#endif
