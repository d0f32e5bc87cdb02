/*
 * doctor_internal.h: the doctor's checks, shared by doctor.c (one server
 * through the client) and doctor_deploy.c (every server of a Sentinel or
 * Redlock deployment, each asked on its own).
 */
#ifndef DLOCK_SRC_DOCTOR_INTERNAL_H
#define DLOCK_SRC_DOCTOR_INTERNAL_H

#include <stdint.h>

#include <hiredis/hiredis.h>

#include "dlock/doctor.h"

/* Our wall clock in microseconds (CLOCK_REALTIME), for TIME. */
int64_t dlock__doctor_wall_us(void);

/* Judges the clock check k from TIME's reply r, sent at before and
 * answered at after (dlock__doctor_wall_us). */
void dlock__doctor_judge_time(const redisReply *r, int64_t before,
                              int64_t after, dlock_doctor_check *k);

/* Judges the version, eviction, persistence and replication checks of
 * out from INFO's text; replica_ok: the server is a cluster replica,
 * judged by its link to its master instead of refused as a replica. */
void dlock__doctor_judge_info(const char *info, int replica_ok,
                              dlock_doctor_report *out);

/* Names the checks of out and counts its unsafe and unknown verdicts. */
void dlock__doctor_tally(dlock_doctor_report *out);

#endif /* DLOCK_SRC_DOCTOR_INTERNAL_H */
