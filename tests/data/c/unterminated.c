/* unterminated.c - the last comment never closes */
int before = 1;
char *s = "a string /* with an opener";
int middle = 2; // line comment
/* this comment runs to the end of the file
int hidden_one = 3;
char *t = "not a string here, we are in a comment";
// not a line comment either */ oops, that closed it
int revived = 4;
/* and this one really never closes...
int hidden_two = 5;
