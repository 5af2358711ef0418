/*  grid.c: the patch grid an image is resized to (include/uform/image.h; the rule: docs/images.md).
 *  Apart from image.c and free of the codecs, so the CUDA backend's decoder links it alone. */
#include "uform/image.h"

#include <math.h>

void uform_image_grid(size_t height, size_t width, size_t max_patches, size_t *rows, size_t *columns) {
    if (!max_patches) max_patches = uform_image_patches_k;
    if (!height || !width) {
        *rows = *columns = 0;
        return;
    }
    /* The scale that makes the image's area max_patches patches, never enlarging past its own size. */
    double side = uform_patch_side_k, area = (double)height * (double)width / (side * side);
    double scale = area > (double)max_patches ? sqrt((double)max_patches / area) : 1.0;
    size_t r = (size_t)lround((double)height * scale / side), c = (size_t)lround((double)width * scale / side);
    r = r ? r : 1, c = c ? c : 1;
    /* Rounding may overshoot: take a patch from the side that is more over its share (rows on a tie). */
    while (r * c > max_patches) {
        if (r > 1 && (c == 1 || (double)r * (double)width >= (double)c * (double)height)) r--;
        else c--;
    }
    *rows = r, *columns = c;
}
