/*
 * resize/gen.c — input generator for `resize` (native only): a synthetic picture (scene.h) as a
 * binary PGM (small) or PPM (medium, large). medium is sized so that native resize costs about
 * SledgeScale's 26 µs "Image Resizing" (SledgeScale §4, Table 3).
 */
#include "../common/scene.h"

int main(int argc, char **argv) {
    static const int dims[3][3] = {{64, 48, 1}, {112, 84, 3}, {640, 480, 3}};
    luge_rng g;
    int size = tool_gen_begin(argc, argv, &g, 0x5e517e00u);
    int w = dims[size][0], h = dims[size][1], ch = dims[size][2];
    unsigned char *px = malloc((size_t)w * h * ch);
    scene_paint(&g, w, h, ch, 6 + 4 * size, 4.0, px);
    const char *comment[] = {" luge resize test input"};
    tool_write_pnm(stdout, ch == 3 ? 6 : 5, w, h, px, comment, 1);
    free(px);
    return 0;
}
