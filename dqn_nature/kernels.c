/* C kernels of the port (kernels.py compiles this file with OpenMP for the machine it runs on
 * and calls it through ctypes; the loops run on torch's OpenMP threads). No Lua counterpart.
 * float32 arithmetic, one rounding per operation (the compiler fuses no multiply-add) except
 * where fmaf is written; bfloat16 values are float32 rounded to nearest even, as torch. */
#include <stdint.h>
#include <string.h>
#include <math.h>

/* MKL's vmsSqrt (n, in, out, mode), torch's square root of float32 tensors on the CPU */
typedef void (*vml_sqrt_t)(int, const float *, float *, int64_t);

/* DeepMindRMSProp.step on one float32 parameter of n elements in one pass, with the bits of its
 * eager torch passes: d = dw[i] (minus wc * w[i], stored back in dw[i], when wc is not 0),
 *     g = decay g + keep d;  g2 = decay g2 + keep d^2;  w += lr d / sqrt(g2 - g^2 + eps)
 * fused where torch's vectorised add, addcmul and their scalar tails fuse, and the square root
 * by torch's own call, vml_sqrt(count, in, out, mode), on blocks of the pass. All arrays are dense
 * with the same layout. */
#define BLOCK 16384
void rmsprop(int64_t n, float *restrict w, float *restrict g, float *restrict g2, float *restrict dw,
             float lr, float decay, float keep, float eps, float wc, vml_sqrt_t vml_sqrt, int64_t mode) {
    /* always a parallel region, even for one block: outside one, MKL would start threads of its own */
    #pragma omp parallel for schedule(static)
    for (int64_t start = 0; start < n; start += BLOCK) {
        int64_t m = n - start < BLOCK ? n - start : BLOCK;
        float *wb = w + start, *gb = g + start, *g2b = g2 + start, *db = dw + start;
        float root[BLOCK];
        #pragma omp simd
        for (int64_t j = 0; j < m; j++) {
            float d = db[j];
            if (wc != 0.0f) {
                d = fmaf(wb[j], -wc, d);
                db[j] = d;
            }
            float gj = fmaf(d, keep, gb[j] * decay);
            float g2j = fmaf(keep * d, d, g2b[j] * decay);
            gb[j] = gj;
            g2b[j] = g2j;
            root[j] = fmaf(-gj, gj, g2j) + eps;
        }
        vml_sqrt((int)m, root, root, mode);
        #pragma omp simd
        for (int64_t j = 0; j < m; j++)
            wb[j] = wb[j] + lr * db[j] / root[j];
    }
}

static inline float from_bf16(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint32_t rounded = (u + ((u >> 16) & 1u) + 0x7FFFu) >> 16;
    return (uint16_t)(f != f ? 0x7FC0u : rounded);
}

/* DeepMindRMSProp's update from bfloat16 gradients, in one pass over a parameter
 * (--precision bf16 on the CPU). For i < n, with d = dw[i] as float32 (minus wc * w[i], stored
 * in grad[i], when grad is not NULL):
 *     g = decay g + keep d;  g2 = decay g2 + keep d^2;  w += lr d / sqrt(g2 - g^2 + eps)
 * and copy[i] = w[i] in bfloat16. All arrays are dense with the same layout. */
#define UPDATE(d)                                                    \
    float gi = g[i] * decay + keep * (d);                            \
    float g2i = g2[i] * decay + keep * (d) * (d);                    \
    float wi = w[i] + lr * ((d) / sqrtf(g2i - gi * gi + eps));       \
    g[i] = gi;                                                       \
    g2[i] = g2i;                                                     \
    w[i] = wi;                                                       \
    copy[i] = to_bf16(wi);

void rmsprop_from_bf16(int64_t n, float *restrict w, uint16_t *restrict copy, float *restrict g,
                       float *restrict g2, const uint16_t *restrict dw, float *restrict grad,
                       float lr, float decay, float keep, float eps, float wc) {
    if (grad) {
        #pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; i++) {
            float d = from_bf16(dw[i]) - wc * w[i];
            grad[i] = d;
            UPDATE(d)
        }
    } else {
        #pragma omp parallel for simd schedule(static)
        for (int64_t i = 0; i < n; i++) {
            float d = from_bf16(dw[i]);
            UPDATE(d)
        }
    }
}

/* n states of 4 frames of hw pixels, (n, 4, hw), as the network's channels-last input (n, hw, 4):
 * uint8 frames (bytes) become k / 255, float32 ones are taken as they are; the result is
 * float32, or bfloat16 when bf16. */
#define INTERLEAVE(src_t, value, dst_t, store)                                     \
    _Pragma("omp parallel for schedule(static)")                                   \
    for (int64_t s = 0; s < n; s++) {                                              \
        const src_t *x = (const src_t *)src + s * 4 * hw;                          \
        dst_t *y = (dst_t *)dst + s * 4 * hw;                                      \
        _Pragma("omp simd")                                                        \
        for (int64_t p = 0; p < hw; p++) {                                         \
            y[4 * p] = store(value(x[p]));                                         \
            y[4 * p + 1] = store(value(x[hw + p]));                                \
            y[4 * p + 2] = store(value(x[2 * hw + p]));                            \
            y[4 * p + 3] = store(value(x[3 * hw + p]));                            \
        }                                                                          \
    }
#define SCALED(k) ((float)(k) / 255.0f)
#define AS_IS(v) (v)

void frames_to_nhwc4(int64_t n, int64_t hw, const void *restrict src, int bytes, void *restrict dst, int bf16) {
    if (bytes && bf16) {
        INTERLEAVE(uint8_t, SCALED, uint16_t, to_bf16)
    } else if (bytes) {
        INTERLEAVE(uint8_t, SCALED, float, AS_IS)
    } else if (bf16) {
        INTERLEAVE(float, AS_IS, uint16_t, to_bf16)
    } else {
        INTERLEAVE(float, AS_IS, float, AS_IS)
    }
}

/* preprocess.scale_y then to_bytes on one RGB screen, float32 (h, w, 3) in [0, 1], with
 * NumPy's float32 roundings: the luminance r R + g G + b B; each row shrunk to n_out cells,
 * cell j = (sum over k < kw of weight[k][j] y[index[k][j]], added in order of k) / count[j],
 * by the plan for w (a zero weight adds +0); then each column by the plan for h; then
 * trunc(255 v) as bytes, (n_out, n_out) row-major. rows: scratch of h * n_out floats. */
void screen_to_bytes(int64_t h, int64_t w, const float *restrict screen, float lr, float lg, float lb,
                     int64_t kw, const int64_t *restrict w_index, const float *restrict w_weight,
                     const float *restrict w_count, int64_t kh, const int64_t *restrict h_index,
                     const float *restrict h_weight, const float *restrict h_count, int64_t n_out,
                     float *restrict rows, uint8_t *restrict out) {
    float y[w], acc[n_out];  /* vector loops over a row's or a column's cells, terms in order */
    for (int64_t r = 0; r < h; r++) {
        const float *pixel = screen + r * w * 3;
        for (int64_t c = 0; c < w; c++)
            y[c] = lr * pixel[3 * c] + lg * pixel[3 * c + 1] + lb * pixel[3 * c + 2];
        for (int64_t j = 0; j < n_out; j++)
            acc[j] = w_weight[j] * y[w_index[j]];
        for (int64_t k = 1; k < kw; k++)
            for (int64_t j = 0; j < n_out; j++)
                acc[j] += w_weight[k * n_out + j] * y[w_index[k * n_out + j]];
        for (int64_t j = 0; j < n_out; j++)
            rows[r * n_out + j] = acc[j] / w_count[j];
    }
    for (int64_t i = 0; i < n_out; i++) {
        for (int64_t k = 0; k < kh; k++) {
            const float *row = rows + h_index[k * n_out + i] * n_out;
            float weight = h_weight[k * n_out + i];
            for (int64_t j = 0; j < n_out; j++)
                acc[j] = k ? acc[j] + weight * row[j] : weight * row[j];
        }
        for (int64_t j = 0; j < n_out; j++)
            out[i * n_out + j] = (uint8_t)(acc[j] / h_count[i] * 255.0f);
    }
}
