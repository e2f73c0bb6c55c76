/* resample.c — pixel_shuffle and pixel_unshuffle, CompositeExplicitAutograd
 * as in torch 1.13: a contiguous copy through a permuted view.
 *
 * Invariants: ATen's checks and messages first (rank >= 3, a positive
 * factor, divisible channel / spatial sizes); then self [*, C, H, W] is
 * viewed (reshape) as [*, C', r, r, H, W] (shuffle) or [*, C, H', r, W', r]
 * (unshuffle), permuted, cloned contiguous and viewed as the result: every
 * dtype, any layout. Autograd records PixelShuffleBackward0 /
 * PixelUnshuffleBackward0 above this kernel (ops.def's ag column).
 */
#include <inttypes.h>
#include <string.h>

#include "composite.h"

#define IL(a, n) od_list_v(OD_T_INT_LIST, (void *)(a), (size_t)(n))

OD_CX_KERNEL(od_cea_pixel_shuffle)
{
    (void)ks;
    (void)op;
    bool shuffle = OD_OPID_OF_CTX(ctx) == OD_OPID_pixel_shuffle;
    const char *fn = shuffle ? "pixel_shuffle" : "pixel_unshuffle";
    od_tensor *x = s->args[0].u.t;
    int64_t r = s->args[1].u.i;
    if (x->ndim < 3)
        return od_error_set(err, OD_EINVAL, "%s expects input to have at least 3 dimensions, but got input with %d dimension(s)",
                            fn, x->ndim);
    if (r <= 0)
        return od_error_set(err, OD_EINVAL, "%s expects a positive %s, but got %" PRId64, fn,
                            shuffle ? "upscale_factor" : "downscale_factor", r);
    int nb = x->ndim - 3;
    int64_t c = x->sizes[nb], h = x->sizes[nb + 1], w = x->sizes[nb + 2], rr, big;
    /* every size below is r * r, c * r * r, h * r or w * r at most: ATen
     * lets them wrap (a shape near 2^63), here they are refused */
    if (__builtin_mul_overflow(r, r, &rr) || __builtin_mul_overflow(c, rr, &big) ||
        __builtin_mul_overflow(h, r, &big) || __builtin_mul_overflow(w, r, &big))
        return od_error_set(err, OD_EINVAL, "%s: %s %" PRId64 " is too large for an input of shape [%" PRId64
                            ", %" PRId64 ", %" PRId64 "]: its output sizes overflow int64", fn,
                            shuffle ? "upscale_factor" : "downscale_factor", r, c, h, w);
    if (shuffle && c % (r * r) != 0)
        return od_error_set(err, OD_EINVAL,
                            "pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                            "upscale_factor, but input.size(-3)=%" PRId64 " is not divisible by %" PRId64,
                            c, r * r);
    if (!shuffle && h % r != 0)
        return od_error_set(err, OD_EINVAL,
                            "pixel_unshuffle expects height to be divisible by downscale_factor, but input.size(-2)=%" PRId64
                            " is not divisible by %" PRId64,
                            h, r);
    if (!shuffle && w % r != 0)
        return od_error_set(err, OD_EINVAL,
                            "pixel_unshuffle expects width to be divisible by downscale_factor, but input.size(-1)=%" PRId64
                            " is not divisible by %" PRId64,
                            w, r);
    if (!shuffle && od_tensor_numel(x) == 0) { /* ATen 1.13's pixel_unshuffle returns an empty input's clone */
        od_tensor *out;
        od_status st = od_cx_clone(x, OD_MF_PRESERVE, &out, err);
        return st ? st : od_cx_return1(s, out);
    }
    int64_t v[OD_MAX_DIMS + 3], perm[OD_MAX_DIMS + 3], o[OD_MAX_DIMS];
    for (int i = 0; i < nb; i++) {
        v[i] = o[i] = x->sizes[i];
        perm[i] = i;
    }
    if (shuffle) { /* [*, C', r, r, H, W] -> [*, C', H, r, W, r] */
        int64_t v6[6] = {c / (r * r), r, r, h, w, 0}, p6[6] = {0, 3, 1, 4, 2, 0}, o3[3] = {c / (r * r), h * r, w * r};
        memcpy(v + nb, v6, 5 * sizeof(int64_t));
        for (int i = 0; i < 5; i++)
            perm[nb + i] = nb + p6[i];
        memcpy(o + nb, o3, sizeof o3);
    } else { /* [*, C, H', r, W', r] -> [*, C, r, r, H', W'] */
        int64_t v5[5] = {c, h / r, r, w / r, r}, p5[5] = {0, 2, 4, 1, 3}, o3[3] = {c * r * r, h / r, w / r};
        memcpy(v + nb, v5, sizeof v5);
        for (int i = 0; i < 5; i++)
            perm[nb + i] = nb + p5[i];
        memcpy(o + nb, o3, sizeof o3);
    }
    if (nb + 5 > OD_MAX_DIMS)
        return od_error_set(err, OD_EINVAL, "%s: too many dimensions", fn);
    od_cx_scope sc = od_cx_scope_begin(err);
    od_tensor *a = od_cx_call(&sc, OD_OPID_reshape, 2, od_tensor_v(x), IL(v, nb + 5));
    od_tensor *b = od_cx_call(&sc, OD_OPID_permute, 2, od_tensor_v(a), IL(perm, nb + 5));
    od_tensor *cl = od_cx_call(&sc, OD_OPID_clone, 2, od_tensor_v(b), od_int(OD_MF_CONTIGUOUS));
    od_tensor *y = od_cx_call(&sc, OD_OPID_view, 2, od_tensor_v(cl), IL(o, nb + 3));
    return od_cx_scope_return1(&sc, s, y);
}
