/*
 * classify/gen.c — input generator for `classify` (native only): 32x32 RGB pictures (scene.h:
 * gradient sky, a few soft-edged shapes, noise) as back-to-back binary PPMs.
 *   small: 1 image (the paper's request: one CIFAR-10 sized picture); medium: 4; large: 16.
 */
#include "../common/scene.h"

int main(int argc, char **argv) {
    static const int count[3] = {1, 4, 16};
    luge_rng g;
    int size = tool_gen_begin(argc, argv, &g, 0xc1a55000u);
    unsigned char px[32 * 32 * 3];
    for (int i = 0; i < count[size]; i++) {
        scene_paint(&g, 32, 32, 3, 2 + (int)luge_rng_below(&g, 4), 3.0, px);
        tool_write_pnm(stdout, 6, 32, 32, px, NULL, 0);
    }
    return 0;
}
