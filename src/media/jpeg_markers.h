/*  jpeg_markers.h: what a JPEG's header says of its colour components, read by libjpeg-turbo's rule
 *  (jdapimin.c, default_decompress_parms), for a decoder that may not look (nvJPEG's documentation
 *  does not say it reads the Adobe marker): a JPEG of untransformed R, G, B goes to the host's libjpeg-turbo. */
#ifndef UFORM_MEDIA_JPEG_MARKERS_H
#define UFORM_MEDIA_JPEG_MARKERS_H

#include <stddef.h>
#include <string.h>

/** Whether a JPEG holds three untransformed R, G, B components: no JFIF marker, and an Adobe APP14
 *  marker with transform 0, or no Adobe marker and the component ids 'R', 'G', 'B'. 0 for anything
 *  else, or where the markers before the first scan cannot be walked within `size` bytes. */
static inline int uform_jpeg_stores_rgb(unsigned char const *bytes, size_t size) {
    int jfif = 0, adobe = 0, transform = -1, components = 0;
    unsigned char ids[3] = {0, 0, 0};
    size_t at = 2; /* past start-of-image */
    while (at + 4 <= size && bytes[at] == 0xff) {
        unsigned marker = bytes[at + 1];
        if (marker == 0xff) { /* a fill byte before the marker */
            ++at;
            continue;
        }
        if (marker == 0xda || marker == 0xd9) break; /* start of scan, end of image */
        if (marker == 0x01 || (marker >= 0xd0 && marker <= 0xd8)) { /* markers without a length */
            at += 2;
            continue;
        }
        size_t length = (size_t)bytes[at + 2] << 8 | bytes[at + 3]; /* counts its own two bytes */
        if (length < 2 || length > size - at - 2) return 0;
        unsigned char const *payload = bytes + at + 4;
        size_t payload_size = length - 2;
        if (marker == 0xe0 && payload_size >= 14 && !memcmp(payload, "JFIF", 5)) jfif = 1; /* as libjpeg: 14 bytes */
        if (marker == 0xee && payload_size >= 12 && !memcmp(payload, "Adobe", 5)) adobe = 1, transform = payload[11];
        if (marker >= 0xc0 && marker <= 0xcf && marker != 0xc4 && marker != 0xc8 && marker != 0xcc && payload_size >= 6) {
            components = payload[5]; /* precision, height, width, then the component count and entries */
            for (size_t c = 0; c < 3 && 6 + 3 * c < payload_size; ++c) ids[c] = payload[6 + 3 * c];
        }
        at += 2 + length;
    }
    if (components != 3 || jfif) return 0;
    if (adobe) return transform == 0;
    return ids[0] == 'R' && ids[1] == 'G' && ids[2] == 'B';
}

#endif
