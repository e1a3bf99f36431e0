/*
 * operator/convolution.h — what Convolution and Deconvolution share between their CPU
 * kernels (operator/convolution.c) and their GPU kernels (operator/convolution_gpu.c:
 * cuDNN, or im2col + cuBLAS; operator/convolution_gpu.cu: the im2col, col2im and bias
 * kernels): the parameters and the geometry of one problem.
 *
 * Both operators relate an "image side" (the convolution's input, the deconvolution's
 * output) to a "column side" (the convolution's output, the deconvolution's input) with a
 * weight of one layout, (col channels, image channels / groups, KH, KW).
 */
#ifndef MXC_OPERATOR_CONVOLUTION_H
#define MXC_OPERATOR_CONVOLUTION_H

#include "operator/op.h"

#include <stdbool.h>
#include <stdint.h>

/* Both operators' parameters; Convolution's table leaves adj and target_shape empty. */
struct conv_param {
    mxc_shape kernel, stride, dilate, pad, adj, target_shape;
    int num_filter, num_group, workspace;
    bool no_bias, cudnn_off;
    int cudnn_tune, layout; /* -1: None, else the choice index */
};

enum { CONV_TUNE_OFF = 0, CONV_TUNE_LIMITED = 1, CONV_TUNE_FASTEST = 2 };
enum { LAYOUT_NCW = 0, LAYOUT_NCHW = 1 };

/* One problem: 1-D problems are 2-D ones with height 1 and a (1, k) kernel. Every field
 * is an int64_t (the GPU cache compares geometries as they are). */
struct conv_geom {
    int64_t batch, groups;
    int64_t ic, ih, iw; /* image side: channels, height, width */
    int64_t oc, oh, ow; /* column side */
    int64_t kh, kw, sh, sw, dh, dw, ph, pw;
    int64_t icg, ocg, krows, pix; /* per group channels; icg*kh*kw; oh*ow */
};

/* The geometry of `data` (N, C, [H,] W) under `p`; MXC_ESHAPE / MXC_EINVAL on shapes the
 * parameters cannot apply to, or whose geometry overflows int64. */
int mxc__conv_geom(const struct conv_param *p, bool deconv, const mxc_shape *data,
                   struct conv_geom *g);

/* Winograd F(2x2, 3x3) on the CPU (operator/conv_winograd.c): whether it serves call c,
 * of geometry g (3x3, stride 1, no dilation, one group, pads up to 2, at least 16
 * channels on either side, temp space within the workspace parameter); the column side y
 * (req) = conv(x, w) + bias of the image side x (bias may be NULL), the image side dx
 * (req) from the column side dy (the adjoint), and the weight gradient dw (req) from x
 * and dy. Convolution's forward, data and weight gradients in turn; Deconvolution's data
 * gradient, forward and weight gradient (with its output gradient as x). Temp space from
 * c->resources[0] (which invalidates what it held); MXC_OK or MXC_ENOMEM. */
bool mxc__winograd_fits(const struct mxc__op_call *c, const struct conv_geom *g);
int mxc__winograd_forward(const struct mxc__op_call *c, const struct conv_geom *g, const float *x,
                          const float *w, const float *bias, float *y, int req);
int mxc__winograd_backward_data(const struct mxc__op_call *c, const struct conv_geom *g,
                                const float *dy, const float *w, float *dx, int req);
int mxc__winograd_backward_weight(const struct mxc__op_call *c, const struct conv_geom *g,
                                  const float *x, const float *dy, float *dw, int req);

/* The GPU kernels (operator/convolution_gpu.c), in CUDA builds only. Declared in every
 * build: nvcc does not get MXC_USE_CUDA, and the .cu definitions should meet these. */
int mxc__conv_forward_gpu(const struct mxc__op_call *c);
int mxc__conv_backward_gpu(const struct mxc__op_call *c);
int mxc__deconv_forward_gpu(const struct mxc__op_call *c);
int mxc__deconv_backward_gpu(const struct mxc__op_call *c);

/* The own GPU path's device work (operator/convolution_gpu.cu), enqueued on `stream`;
 * MXC_OK or MXC_EDEVICE. img is one image (ic, ih, iw), col its columns
 * (ic * kh * kw, oh * ow): group gi's rows start at gi * krows. */
int mxc__conv_im2col_gpu(const struct conv_geom *g, const float *img, float *col, void *stream);
/* img (req) = col2im(col): each image element sums the columns it feeds (no atomics). */
int mxc__conv_col2im_gpu(const struct conv_geom *g, const float *col, float *img, int req,
                         void *stream);
/* x (n, c, pix) += b (c) */
int mxc__conv_add_bias_gpu(float *x, const float *b, int64_t n, int64_t c, int64_t pix,
                           void *stream);
/* db (c) (req) = the sums over n and pix of dy (n, c, pix) */
int mxc__conv_bias_grad_gpu(const float *dy, float *db, int64_t n, int64_t c, int64_t pix, int req,
                            void *stream);

#endif /* MXC_OPERATOR_CONVOLUTION_H */
