/* comments.c - comment edge cases */

/* /* looks nested but is not: the first */ closes it */
int after_fake_nesting;

/**/ int empty_comment;
/***/ int three_stars;
/****** banner ******/
/* ** * ** */ int stars_inside;
/*/ not closed by the slash right after the opener */ int slash_star_slash;

// // double line comment
//* line comment starting with a star
int a = 1; //* still a line comment */ int not_code;
int b = 2 //**/
  + 3;
int c = 4 /**// 2;
int d = 8 /*/ 2 */ / 2;

/*
 * multi-line
 * block
 * comment with code inside: int hidden = 1;
 */
int visible = 1;

int e = 1 / /**/ 2;
int f = 6 //**/ 2
;
/* comment */ /* adjacent */ /* comments */ int g;
int h; /* trailing */
int *p = &h, i = 10 /*comment*/ * 2, j = *p /* deref */;
/* UTF-8 in comments: naïve café — 日本語 — ✓ */
// ümlauts in a line comment: äöü ß
#define X 1 /* comment in a directive */ + 2 // and another
int tricky_chars = '/' + '*' + '/' + '/';
/* a quote inside a comment: don't panic, "strings" here are not strings */
int last_line_no_newline = 0;
