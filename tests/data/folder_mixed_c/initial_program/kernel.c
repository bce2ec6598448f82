/* The numeric kernel: prints one number, the weight, which the evaluator feeds to combine.py. */
#include <stdio.h>

/* EVOLVE-BLOCK-START */
static double weight(void) {
    return 1.0;
}
/* EVOLVE-BLOCK-END */

int main(void) {
    printf("%.6f\n", weight());
    return 0;
}
