/*
 * io/image.c — JPEG (libjpeg-turbo) and PNG (libpng) decoding into 8-bit RGB, HWC, for the
 * image record iterator (image_iter.c). The pixels are what MXNet gets: its
 * ImageRecordIter and mx.image.imdecode decode with OpenCV, which drives the same two
 * libraries, so every choice below follows OpenCV's imdecode(IMREAD_COLOR) — libjpeg's
 * defaults (islow IDCT, fancy upsampling), CMYK turned into RGB by OpenCV's formula,
 * PNG's 16-bit samples cut to their high byte, alpha and tRNS dropped (not composited),
 * gray and palettes expanded, no gamma correction — and tests/check_image.c compares the
 * pixels with MXNet's on the same files.
 *
 * JPEG encoding (mxc__image_encode_jpeg) serves im2rec (im2rec.c).
 *
 * Both libraries report fatal errors through a callback that must not return; it longjmps
 * back here, and everything that must be freed after it lives outside the jump's scope.
 */
#include "common/common.h"
#include "io/io_impl.h"

#include <jerror.h>
#include <jpeglib.h>
#include <png.h>
#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

/* Largest decoded image accepted: 2^28 bytes (about 9,400 x 9,400 RGB pixels), far above
 * a training image and below what would exhaust memory from one lying header. */
#define MAX_IMAGE_BYTES ((size_t)1 << 28)

void mxc__image_free(struct mxc__image *img) {
    mxc__free(img->data);
    memset(img, 0, sizeof *img);
}

int mxc__image_reserve(struct mxc__image *img, const char *what, int64_t height, int64_t width) {
    if (height <= 0 || width <= 0 || height * width > (int64_t)(MAX_IMAGE_BYTES / 3))
        return mxc__error(MXC_EFORMAT, "%s: a %" PRId64 " x %" PRId64 " image (at most %zu pixels)",
                          what, height, width, MAX_IMAGE_BYTES / 3);
    size_t need = (size_t)(height * width * 3);
    if (need > img->cap) {
        uint8_t *grown = mxc__realloc(img->data, need);
        if (!grown)
            return mxc__error(MXC_ENOMEM, "%s: out of memory for %zu bytes", what, need);
        img->data = grown;
        img->cap = need;
    }
    img->height = (int)height;
    img->width = (int)width;
    return MXC_OK;
}

/* ---- JPEG -------------------------------------------------------------------------- */

struct jpeg_fail {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
};

static void jpeg_fatal(j_common_ptr cinfo) {
    struct jpeg_fail *f = (struct jpeg_fail *)cinfo->err;
    f->mgr.format_message(cinfo, f->message);
    longjmp(f->jump, 1);
}

/* Warnings: data cut short (libjpeg would pad it with gray) is an error; the others (e.g.
 * extraneous bytes before a marker, common in camera files) are accepted as OpenCV
 * accepts them, and nothing is printed. */
static void jpeg_warn(j_common_ptr cinfo, int level) {
    struct jpeg_fail *f = (struct jpeg_fail *)cinfo->err;
    int code = f->mgr.msg_code;
    if (level < 0 && (code == JWRN_JPEG_EOF || code == JWRN_HIT_MARKER))
        jpeg_fatal(cinfo);
}

/* OpenCV's CMYK to RGB (icvCvt_CMYK2BGR_8u_C4C3R: libjpeg gives Adobe's inverted CMYK). */
static void cmyk_row_to_rgb(const uint8_t *cmyk, uint8_t *rgb, int width) {
    for (int i = 0; i < width; i++, cmyk += 4, rgb += 3) {
        int k = cmyk[3];
        for (int c = 0; c < 3; c++)
            rgb[c] = (uint8_t)(k - ((255 - cmyk[c]) * k >> 8));
    }
}

static int decode_jpeg(const char *what, const uint8_t *bytes, size_t size,
                       struct mxc__image *img) {
    struct jpeg_decompress_struct cinfo;
    struct jpeg_fail fail;
    /* volatile: changed after setjmp and read after the longjmp */
    uint8_t *volatile cmyk = NULL;
    volatile int rc = MXC_OK;
    cinfo.err = jpeg_std_error(&fail.mgr);
    fail.mgr.error_exit = jpeg_fatal;
    fail.mgr.emit_message = jpeg_warn;
    fail.message[0] = '\0';
    if (setjmp(fail.jump)) {
        if (rc == MXC_OK)
            rc = mxc__error(MXC_EFORMAT, "image decode: %s: corrupt JPEG: %s", what, fail.message);
        goto done;
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, bytes, (unsigned long)size);
    jpeg_read_header(&cinfo, TRUE);
    bool is_cmyk = cinfo.num_components == 4;
    cinfo.out_color_space = is_cmyk ? JCS_CMYK : JCS_RGB;
    jpeg_start_decompress(&cinfo);
    rc = mxc__image_reserve(img, what, cinfo.output_height, cinfo.output_width);
    if (rc != MXC_OK)
        goto done;
    if (is_cmyk) {
        cmyk = mxc__malloc((size_t)cinfo.output_width * 4);
        if (!cmyk) {
            rc = mxc__error(MXC_ENOMEM, "image decode: %s: out of memory", what);
            goto done;
        }
    }
    size_t stride = (size_t)img->width * 3;
    while (cinfo.output_scanline < cinfo.output_height) {
        uint8_t *row = img->data + cinfo.output_scanline * stride;
        JSAMPROW dst = is_cmyk ? cmyk : row;
        jpeg_read_scanlines(&cinfo, &dst, 1);
        if (is_cmyk)
            cmyk_row_to_rgb(cmyk, row, img->width);
    }
    jpeg_finish_decompress(&cinfo);
done:
    jpeg_destroy_decompress(&cinfo);
    mxc__free(cmyk);
    return rc;
}

int mxc__image_encode_jpeg(const struct mxc__image *img, int quality, const char *what,
                           unsigned char **out, unsigned long *size) {
    struct jpeg_compress_struct cinfo;
    struct jpeg_fail fail;
    volatile int rc = MXC_OK;
    *out = NULL;
    *size = 0;
    cinfo.err = jpeg_std_error(&fail.mgr);
    fail.mgr.error_exit = jpeg_fatal;
    fail.mgr.emit_message = jpeg_warn;
    if (setjmp(fail.jump)) {
        rc = mxc__error(MXC_ENOMEM, "%s: JPEG encoding failed: %s", what, fail.message);
        goto done;
    }
    jpeg_create_compress(&cinfo);
    jpeg_mem_dest(&cinfo, out, size);
    cinfo.image_width = (JDIMENSION)img->width;
    cinfo.image_height = (JDIMENSION)img->height;
    cinfo.input_components = 3;
    cinfo.in_color_space = JCS_RGB;
    jpeg_set_defaults(&cinfo);
    jpeg_set_quality(&cinfo, quality, TRUE);
    jpeg_start_compress(&cinfo, TRUE);
    while (cinfo.next_scanline < cinfo.image_height) {
        JSAMPROW row = img->data + (size_t)cinfo.next_scanline * (size_t)img->width * 3;
        jpeg_write_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_compress(&cinfo);
done:
    jpeg_destroy_compress(&cinfo);
    if (rc != MXC_OK) {
        free(*out);
        *out = NULL;
        *size = 0;
    }
    return rc;
}

/* ---- PNG --------------------------------------------------------------------------- */

struct png_source {
    const uint8_t *bytes;
    size_t size, pos;
    char message[256];
    jmp_buf jump;
};

static void png_fatal(png_structp png, png_const_charp msg) {
    struct png_source *s = png_get_error_ptr(png);
    snprintf(s->message, sizeof s->message, "%s", msg);
    longjmp(s->jump, 1);
}

static void png_warn(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg; /* benign (an unknown chunk, a bad gamma value): read on, as OpenCV does */
}

static void png_read_mem(png_structp png, png_bytep out, png_size_t n) {
    struct png_source *s = png_get_io_ptr(png);
    if (n > s->size - s->pos)
        png_error(png, "the data ends early");
    memcpy(out, s->bytes + s->pos, n);
    s->pos += n;
}

static int decode_png(const char *what, const uint8_t *bytes, size_t size, struct mxc__image *img) {
    struct png_source src = {.bytes = bytes, .size = size};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_fatal, png_warn);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    png_bytep *volatile rows = NULL;
    volatile int rc = MXC_OK;
    if (!info) {
        rc = mxc__error(MXC_ENOMEM, "image decode: %s: out of memory", what);
        goto done;
    }
    if (setjmp(src.jump)) {
        if (rc == MXC_OK)
            rc = mxc__error(MXC_EFORMAT, "image decode: %s: corrupt PNG: %s", what, src.message);
        goto done;
    }
    png_set_read_fn(png, &src, png_read_mem);
    png_read_info(png, info);
    uint32_t width = png_get_image_width(png, info), height = png_get_image_height(png, info);
    int depth = png_get_bit_depth(png, info), type = png_get_color_type(png, info);
    /* OpenCV's transforms for IMREAD_COLOR, in its order */
    if (depth == 16)
        png_set_strip_16(png);
    png_set_strip_alpha(png);
    if (type == PNG_COLOR_TYPE_PALETTE)
        png_set_palette_to_rgb(png);
    if ((type & PNG_COLOR_MASK_COLOR) == 0 && depth < 8)
        png_set_expand_gray_1_2_4_to_8(png);
    if ((type & PNG_COLOR_MASK_COLOR) == 0)
        png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != (size_t)width * 3)
        png_error(png, "unexpected row size after the transforms");
    rc = mxc__image_reserve(img, what, height, width);
    if (rc != MXC_OK)
        goto done;
    rows = mxc__malloc((size_t)height * sizeof *rows);
    if (!rows) {
        rc = mxc__error(MXC_ENOMEM, "image decode: %s: out of memory", what);
        goto done;
    }
    for (uint32_t y = 0; y < height; y++)
        rows[y] = img->data + (size_t)y * width * 3;
    png_read_image(png, rows);
    png_read_end(png, NULL);
done:
    png_destroy_read_struct(png ? &png : NULL, info ? &info : NULL, NULL);
    mxc__free(rows);
    return rc;
}

/* ---- Resize ------------------------------------------------------------------------ */

/* Bilinear resize of an RGB image as OpenCV's cv::resize(INTER_LINEAR) on 8-bit data:
 * source coordinates (d + 0.5) * scale - 0.5 clamped to the edges, weights in 11-bit fixed
 * point, rows combined as its vector code does (a value may differ from OpenCV's scalar
 * tail by one level). */
static void resize_bilinear(const struct mxc__image *in, struct mxc__image *out, int *xofs,
                            short *alpha, int *row0, int *row1) {
    enum { BITS = 11, ONE = 1 << BITS };
    int sw = in->width, sh = in->height, dw = out->width, dh = out->height;
    double scale_x = 1.0 / ((double)dw / sw), scale_y = 1.0 / ((double)dh / sh);
    for (int dx = 0; dx < dw; dx++) {
        float fx = (float)((dx + 0.5) * scale_x - 0.5);
        int sx = (int)floorf(fx);
        fx -= (float)sx;
        if (sx < 0)
            fx = 0, sx = 0;
        if (sx >= sw - 1)
            fx = 0, sx = sw - 1;
        xofs[dx] = sx;
        /* each weight rounded on its own, as OpenCV does: they may not sum to ONE */
        alpha[2 * dx] = (short)lrintf((1.f - fx) * ONE);
        alpha[2 * dx + 1] = (short)lrintf(fx * ONE);
    }
    int *rows[2] = {row0, row1};
    int held[2] = {-1, -1}; /* the source rows rows[0] and rows[1] hold, as OpenCV's cache */
    int row_len = dw * 3;
    for (int dy = 0; dy < dh; dy++) {
        float fy = (float)((dy + 0.5) * scale_y - 0.5);
        int sy = (int)floorf(fy);
        fy -= (float)sy;
        if (sy < 0)
            fy = 0, sy = 0;
        if (sy >= sh - 1)
            fy = 0, sy = sh - 1;
        int b0 = (short)lrintf((1.f - fy) * ONE), b1 = (short)lrintf(fy * ONE);
        for (int k = 0; k < 2; k++) {
            int y = sy + k < sh ? sy + k : sh - 1;
            if (held[k] == y)
                continue;
            if (k == 0 && held[1] == y) { /* the next row down: reuse it */
                int *t = rows[0];
                rows[0] = rows[1], rows[1] = t;
                held[0] = y, held[1] = -1;
                continue;
            }
            const uint8_t *s = in->data + (size_t)y * sw * 3;
            int *d = rows[k];
            for (int dx = 0; dx < dw; dx++) {
                int sx = xofs[dx], a0 = alpha[2 * dx], a1 = alpha[2 * dx + 1];
                int sx1 = sx + 1 < sw ? sx + 1 : sx;
                for (int c = 0; c < 3; c++)
                    d[dx * 3 + c] = s[sx * 3 + c] * a0 + s[sx1 * 3 + c] * a1;
            }
            held[k] = y;
        }
        row0 = rows[0], row1 = rows[1];
        uint8_t *o = out->data + (size_t)dy * row_len;
        /* the columns OpenCV 3.4's SSE2 loop covers (VResizeLinearVec_32s8u): blocks of 16,
         * then of 4 while more than 4 are left; the rest is its scalar loop */
        int simd = 0;
        while (simd <= row_len - 16)
            simd += 16;
        while (simd < row_len - 4)
            simd += 4;
        for (int x = 0; x < row_len; x++) {
            int v;
            if (x < simd)
                v = (((b0 * (row0[x] >> 4)) >> 16) + ((b1 * (row1[x] >> 4)) >> 16) + 2) >> 2;
            else
                v = (b0 * row0[x] + b1 * row1[x] + (1 << (2 * BITS - 1))) >> (2 * BITS);
            o[x] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        }
    }
}

int mxc__image_resize_shorter(const struct mxc__image *in, int size, struct mxc__image *out,
                              const char *what) {
    int resize = size;
    int64_t nh, nw;
    if (in->height > in->width) {
        nh = (int64_t)resize * in->height / in->width;
        nw = resize;
    } else {
        nh = resize;
        nw = (int64_t)resize * in->width / in->height;
    }
    int rc = MXC_OK;
    int *xofs = NULL, *rows = NULL;
    short *alpha = NULL;
    MXC_TRY(mxc__image_reserve(out, what, nh, nw));
    if (nh == in->height && nw == in->width) { /* as cv::resize: the same size is a copy */
        memcpy(out->data, in->data, (size_t)nh * (size_t)nw * 3);
        return MXC_OK;
    }
    xofs = mxc__malloc((size_t)nw * sizeof *xofs);
    alpha = mxc__malloc(2 * (size_t)nw * sizeof *alpha);
    rows = mxc__malloc((size_t)nw * 3 * 2 * sizeof *rows);
    MXC_CHECK(xofs && alpha && rows, MXC_ENOMEM, "%s: out of memory resizing", what);
    resize_bilinear(in, out, xofs, alpha, rows, rows + nw * 3);
fail:
    mxc__free(xofs);
    mxc__free(alpha);
    mxc__free(rows);
    return rc;
}

/* ---- Either ------------------------------------------------------------------------ */

int mxc__image_decode(const char *what, const void *bytes, size_t size, struct mxc__image *img) {
    static const uint8_t jpeg_sig[] = {0xff, 0xd8, 0xff};
    static const uint8_t png_sig[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    const uint8_t *b = bytes;
    if (size >= sizeof jpeg_sig && memcmp(b, jpeg_sig, sizeof jpeg_sig) == 0)
        return decode_jpeg(what, b, size, img);
    if (size >= sizeof png_sig && memcmp(b, png_sig, sizeof png_sig) == 0)
        return decode_png(what, b, size, img);
    char head[3 * 8 + 1] = "";
    for (size_t i = 0; i < size && i < 8; i++)
        snprintf(head + 3 * i, 4, "%02x ", b[i]);
    return mxc__error(MXC_EFORMAT,
                      "image decode: %s: %zu bytes that are neither JPEG nor PNG (they start "
                      "with %s)",
                      what, size, size ? head : "nothing");
}
