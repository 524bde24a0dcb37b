/* A straightforward C implementation of OP2's Airfoil loops (save_soln, adt_calc, res_calc,
 * bres_calc, update), the reference that `benches/benches/mesh.rs` times pardis's sequential
 * backend against. Same kernels, same loop order, same element order as
 * `parallel_plan::unstructured::apps::airfoil`; maps are the mesh's 0-based u32 tables.
 * Built by `benches/build.rs` with -O3 when a C compiler exists. */
#include <math.h>
#include <stdint.h>
#include <stddef.h>

#define GAM 1.4
#define GM1 (GAM - 1.0)
#define CFL 0.9
#define EPS 0.05

static inline void save_soln(const double *q, double *qold) {
  for (int n = 0; n < 4; n++) qold[n] = q[n];
}

static inline void adt_calc(const double *x1, const double *x2, const double *x3,
                            const double *x4, const double *q, double *adt) {
  double dx, dy, ri, u, v, c;
  ri = 1.0 / q[0];
  u = ri * q[1];
  v = ri * q[2];
  c = sqrt(GAM * GM1 * (ri * q[3] - 0.5 * (u * u + v * v)));
  dx = x2[0] - x1[0]; dy = x2[1] - x1[1];
  *adt = fabs(u * dy - v * dx) + c * sqrt(dx * dx + dy * dy);
  dx = x3[0] - x2[0]; dy = x3[1] - x2[1];
  *adt += fabs(u * dy - v * dx) + c * sqrt(dx * dx + dy * dy);
  dx = x4[0] - x3[0]; dy = x4[1] - x3[1];
  *adt += fabs(u * dy - v * dx) + c * sqrt(dx * dx + dy * dy);
  dx = x1[0] - x4[0]; dy = x1[1] - x4[1];
  *adt += fabs(u * dy - v * dx) + c * sqrt(dx * dx + dy * dy);
  *adt = *adt / CFL;
}

static inline void res_calc(const double *x1, const double *x2, const double *q1,
                            const double *q2, const double *adt1, const double *adt2,
                            double *res1, double *res2) {
  double dx, dy, mu, ri, p1, vol1, p2, vol2, f;
  dx = x1[0] - x2[0];
  dy = x1[1] - x2[1];
  ri = 1.0 / q1[0];
  p1 = GM1 * (q1[3] - 0.5 * ri * (q1[1] * q1[1] + q1[2] * q1[2]));
  vol1 = ri * (q1[1] * dy - q1[2] * dx);
  ri = 1.0 / q2[0];
  p2 = GM1 * (q2[3] - 0.5 * ri * (q2[1] * q2[1] + q2[2] * q2[2]));
  vol2 = ri * (q2[1] * dy - q2[2] * dx);
  mu = 0.5 * ((*adt1) + (*adt2)) * EPS;
  f = 0.5 * (vol1 * q1[0] + vol2 * q2[0]) + mu * (q1[0] - q2[0]);
  res1[0] += f; res2[0] -= f;
  f = 0.5 * (vol1 * q1[1] + p1 * dy + vol2 * q2[1] + p2 * dy) + mu * (q1[1] - q2[1]);
  res1[1] += f; res2[1] -= f;
  f = 0.5 * (vol1 * q1[2] - p1 * dx + vol2 * q2[2] - p2 * dx) + mu * (q1[2] - q2[2]);
  res1[2] += f; res2[2] -= f;
  f = 0.5 * (vol1 * (q1[3] + p1) + vol2 * (q2[3] + p2)) + mu * (q1[3] - q2[3]);
  res1[3] += f; res2[3] -= f;
}

static inline void bres_calc(const double *x1, const double *x2, const double *q1,
                             const double *adt1, double *res1, int64_t bound,
                             const double *qinf) {
  double dx, dy, mu, ri, p1, vol1, p2, vol2, f;
  dx = x1[0] - x2[0];
  dy = x1[1] - x2[1];
  ri = 1.0 / q1[0];
  p1 = GM1 * (q1[3] - 0.5 * ri * (q1[1] * q1[1] + q1[2] * q1[2]));
  if (bound == 1) {
    res1[1] += +p1 * dy;
    res1[2] += -p1 * dx;
  } else {
    vol1 = ri * (q1[1] * dy - q1[2] * dx);
    ri = 1.0 / qinf[0];
    p2 = GM1 * (qinf[3] - 0.5 * ri * (qinf[1] * qinf[1] + qinf[2] * qinf[2]));
    vol2 = ri * (qinf[1] * dy - qinf[2] * dx);
    mu = (*adt1) * EPS;
    f = 0.5 * (vol1 * q1[0] + vol2 * qinf[0]) + mu * (q1[0] - qinf[0]);
    res1[0] += f;
    f = 0.5 * (vol1 * q1[1] + p1 * dy + vol2 * qinf[1] + p2 * dy) + mu * (q1[1] - qinf[1]);
    res1[1] += f;
    f = 0.5 * (vol1 * q1[2] - p1 * dx + vol2 * qinf[2] - p2 * dx) + mu * (q1[2] - qinf[2]);
    res1[2] += f;
    f = 0.5 * (vol1 * (q1[3] + p1) + vol2 * (qinf[3] + p2)) + mu * (q1[3] - qinf[3]);
    res1[3] += f;
  }
}

static inline void update(const double *qold, double *q, double *res, const double *adt,
                          double *rms) {
  double del, adti = 1.0 / (*adt);
  for (int n = 0; n < 4; n++) {
    del = adti * res[n];
    q[n] = qold[n] - del;
    res[n] = 0.0;
    *rms += del * del;
  }
}

/* Runs `niter` Airfoil iterations in place on q (4 per cell) with work arrays qold (4 per
 * cell), adt (1 per cell) and res (4 per cell, zero on entry); returns the last iteration's
 * rms residual sum (before OP2's sqrt(rms / ncell)). */
double pardis_airfoil_c(size_t ncell, size_t nedge, size_t nbedge, const uint32_t *cell,
                        const uint32_t *edge, const uint32_t *ecell, const uint32_t *bedge,
                        const uint32_t *becell, const int64_t *bound, const double *x,
                        const double *qinf, double *q, double *qold, double *adt,
                        double *res, size_t niter) {
  double rms = 0.0;
  for (size_t iter = 0; iter < niter; iter++) {
    for (size_t i = 0; i < ncell; i++) save_soln(&q[4 * i], &qold[4 * i]);
    for (int k = 0; k < 2; k++) {
      for (size_t i = 0; i < ncell; i++)
        adt_calc(&x[2 * cell[4 * i]], &x[2 * cell[4 * i + 1]], &x[2 * cell[4 * i + 2]],
                 &x[2 * cell[4 * i + 3]], &q[4 * i], &adt[i]);
      for (size_t i = 0; i < nedge; i++)
        res_calc(&x[2 * edge[2 * i]], &x[2 * edge[2 * i + 1]], &q[4 * ecell[2 * i]],
                 &q[4 * ecell[2 * i + 1]], &adt[ecell[2 * i]], &adt[ecell[2 * i + 1]],
                 &res[4 * ecell[2 * i]], &res[4 * ecell[2 * i + 1]]);
      for (size_t i = 0; i < nbedge; i++)
        bres_calc(&x[2 * bedge[2 * i]], &x[2 * bedge[2 * i + 1]], &q[4 * becell[i]],
                  &adt[becell[i]], &res[4 * becell[i]], bound[i], qinf);
      rms = 0.0;
      for (size_t i = 0; i < ncell; i++) update(&qold[4 * i], &q[4 * i], &res[4 * i], &adt[i], &rms);
    }
  }
  return rms;
}
