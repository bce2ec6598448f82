/* Golomb ruler with 10 marks: print the marks, one integer per line, smallest first.
 *
 * A Golomb ruler is a set of integer marks in which every pair of marks is a different
 * distance apart. The evaluator compiles this file with the system C compiler
 * (cc -std=c99 -O2), runs it, checks the marks and scores the length (last mark minus first).
 * Shorter is better; the shortest possible ruler with 10 marks has length 55.
 */
#include <stdio.h>
#include <string.h>

#define MARKS 10
#define MAX_LENGTH 1024

// EVOLVE-BLOCK-START
/* Greedy construction: add the smallest next mark whose distances to all earlier marks are
 * new (the Mian-Chowla sequence). Fills marks[0..MARKS-1]. */
static void build_ruler(int marks[MARKS]) {
    static char used[MAX_LENGTH + 1];
    memset(used, 0, sizeof used);
    marks[0] = 0;
    int count = 1;
    for (int candidate = 1; count < MARKS && candidate <= MAX_LENGTH; candidate++) {
        int ok = 1;
        for (int i = 0; i < count && ok; i++) {
            if (used[candidate - marks[i]]) {
                ok = 0;
            }
        }
        if (!ok) {
            continue;
        }
        for (int i = 0; i < count; i++) {
            used[candidate - marks[i]] = 1;
        }
        marks[count++] = candidate;
    }
}
// EVOLVE-BLOCK-END

int main(void) {
    int marks[MARKS];
    build_ruler(marks);
    for (int i = 0; i < MARKS; i++) {
        printf("%d\n", marks[i]);
    }
    return 0;
}
