/* DeepMindRMSProp's update from bfloat16 gradients, in one pass over each parameter
 * (--precision bf16 on the CPU; optim.py compiles this file with OpenMP for the machine it
 * runs on and calls it through ctypes). No Lua counterpart.
 *
 * For i < n, with d = dw[i] as float32 (minus wc * w[i], stored in grad[i], when grad is not NULL):
 *     g = decay g + keep d;  g2 = decay g2 + keep d^2;  w += lr d / sqrt(g2 - g^2 + eps)
 * and copy[i] = w[i] rounded to bfloat16 (to nearest even, as torch). All arrays are dense
 * with the same layout; float32 arithmetic, one rounding per operation (no fused multiply-add,
 * a correctly rounded square root). */
#include <stdint.h>
#include <string.h>
#include <math.h>

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
