char *unterminated_string = "runs to the end of the line
int next_line = 1;
char c = 'x
int after_bad_char = 2;
char *esc = "backslash at end \\

";
