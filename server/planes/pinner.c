/* SPDX-License-Identifier: Apache-2.0 */
/* pinner.c - see pinner.h. */
#include "pinner.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "errors.h"
#include "log.h"
#include "uvx.h"

/* ---- the thread ---- */

/* Run j's op (pinning thread, no lock held). */
static void pinner_run(pinner *p, pin_job *j)
{
    backend *b = p->b;
    j->status = 0;
    j->why[0] = '\0';
    switch (j->kind) {
    case PIN_ALLOC:
        j->ptr = b->ops->host_alloc(b, j->len);
        if (!j->ptr) {
            j->status = GPUQ_E_NO_MEMORY;
            snprintf(j->why, sizeof j->why, "the %s backend could not allocate %zu bytes of %s",
                     b->ops->name, j->len,
                     b->ops->host_register ? "page-locked host memory" : "host memory");
        }
        break;
    case PIN_FREE:
        b->ops->host_free(b, j->ptr);
        break;
    case PIN_REGISTER:
        if (b->ops->host_register)
            j->status = b->ops->host_register(b, j->ptr, j->len, j->why, sizeof j->why);
        break;
    case PIN_RELEASE:
        if (j->registered && b->ops->host_unregister)
            b->ops->host_unregister(b, j->ptr);
        if (munmap(j->ptr, j->len) != 0)
            log_error("pinner: munmap(%zu bytes): %s", j->len, strerror(errno));
        break;
    }
}

static pin_job *pinner_pop(pin_job **head, pin_job **tail)
{
    pin_job *j = *head;
    if (j) {
        *head = j->next;
        if (!*head)
            *tail = NULL;
        j->next = NULL;
    }
    return j;
}

static void pinner_push(pin_job **head, pin_job **tail, pin_job *j)
{
    j->next = NULL;
    if (*tail)
        (*tail)->next = j;
    else
        *head = j;
    *tail = j;
}

static void pinner_main(void *arg)
{
    pinner *p = arg;
    char why[160] = "";
    int rc = p->b->ops->host_thread_init(p->b, why, sizeof why);
    uv_mutex_lock(&p->mu);
    p->init_rc = rc;
    snprintf(p->init_why, sizeof p->init_why, "%s", why);
    p->init_done = true;
    uv_cond_broadcast(&p->cv);
    if (rc != 0) {
        uv_mutex_unlock(&p->mu);
        return;
    }
    for (;;) {
        while (!p->urgent && !p->lazy && !p->stop)
            uv_cond_wait(&p->cv, &p->mu);
        pin_job *j = pinner_pop(&p->urgent, &p->urgent_tail);
        if (!j)
            j = pinner_pop(&p->lazy, &p->lazy_tail);
        if (!j)
            break; /* stopped, nothing left */
        uv_mutex_unlock(&p->mu);
        pinner_run(p, j);
        uv_mutex_lock(&p->mu);
        pinner_push(&p->done, &p->done_tail, j);
        bool closing = p->stop;
        uv_mutex_unlock(&p->mu);
        /* (after stop the loop runs the done list itself, after the join) */
        if (!closing) {
            int e = uv_async_send(&p->async);
            if (e < 0)
                log_error("pinner: uv_async_send: %s", uv_strerror(e));
        }
        uv_mutex_lock(&p->mu);
    }
    uv_mutex_unlock(&p->mu);
}

/* ---- the loop ---- */

/* The jobs that ran: their done callbacks (which may submit more). */
static void pinner_drain(pinner *p)
{
    uv_mutex_lock(&p->mu);
    pin_job *j = p->done;
    p->done = p->done_tail = NULL;
    uv_mutex_unlock(&p->mu);
    while (j) {
        pin_job *next = j->next;
        j->next = NULL;
        p->pending--;
        p->jobs++;
        if (j->done)
            j->done(j); /* owns j from here */
        j = next;
    }
}

static void pinner_on_async(uv_async_t *h)
{
    pinner_drain(h->data);
}

int pinner_init(pinner *p, uv_loop_t *loop, backend *b, char *why, size_t cap)
{
    memset(p, 0, sizeof *p);
    p->b = b;
    if (!b->ops->host_thread_init)
        return 0;
    int ret = GPUQ_E_INTERNAL; /* a libuv call failed, unless the device did */
    int rc = uv_mutex_init(&p->mu);
    if (rc < 0) {
        snprintf(why, cap, "uv_mutex_init: %s", uv_strerror(rc));
        return ret;
    }
    if ((rc = uv_cond_init(&p->cv)) < 0) {
        snprintf(why, cap, "uv_cond_init: %s", uv_strerror(rc));
        goto err_after_mutex;
    }
    if ((rc = uv_async_init(loop, &p->async, pinner_on_async)) < 0) {
        snprintf(why, cap, "uv_async_init: %s", uv_strerror(rc));
        goto err_after_cond;
    }
    p->async.data = p;
    if ((rc = uv_thread_create(&p->thread, pinner_main, p)) < 0) {
        snprintf(why, cap, "uv_thread_create: %s", uv_strerror(rc));
        goto err_after_async;
    }
    /* Wait for the thread's device setup: a failure stops the start-up. */
    uv_mutex_lock(&p->mu);
    while (!p->init_done)
        uv_cond_wait(&p->cv, &p->mu);
    uv_mutex_unlock(&p->mu);
    if (p->init_rc != 0) {
        snprintf(why, cap, "the pinning thread: %s", p->init_why);
        rc = uv_thread_join(&p->thread);
        if (rc < 0)
            log_error("pinner: uv_thread_join: %s", uv_strerror(rc));
        ret = p->init_rc < 0 ? p->init_rc : GPUQ_E_DEVICE;
        goto err_after_async;
    }
    p->on = true;
    p->async_on = true;
    return 0;

err_after_async:
    uvx_close((uv_handle_t *)&p->async, NULL);
err_after_cond:
    uv_cond_destroy(&p->cv);
err_after_mutex:
    uv_mutex_destroy(&p->mu);
    return ret;
}

bool pinner_on(const pinner *p)
{
    return p && p->on;
}

void pinner_submit(pinner *p, pin_job *j)
{
    bool urgent = j->kind == PIN_ALLOC || j->kind == PIN_REGISTER;
    p->pending++;
    uv_mutex_lock(&p->mu);
    if (urgent)
        pinner_push(&p->urgent, &p->urgent_tail, j);
    else
        pinner_push(&p->lazy, &p->lazy_tail, j);
    uv_cond_signal(&p->cv);
    uv_mutex_unlock(&p->mu);
}

static void pinner_free_done(pin_job *j)
{
    free(j);
}

void pinner_free_host(pinner *p, backend *b, void *ptr)
{
    pin_job *j = pinner_on(p) ? calloc(1, sizeof *j) : NULL;
    if (!j) {
        if (pinner_on(p))
            log_error("pinner: out of memory for a free job: freeing on the loop");
        b->ops->host_free(b, ptr);
        return;
    }
    j->kind = PIN_FREE;
    j->ptr = ptr;
    j->done = pinner_free_done;
    pinner_submit(p, j);
}

void pinner_close(pinner *p)
{
    if (!p->on)
        return;
    uv_mutex_lock(&p->mu);
    p->stop = true;
    uv_cond_signal(&p->cv);
    uv_mutex_unlock(&p->mu);
    int rc = uv_thread_join(&p->thread);
    if (rc < 0)
        log_error("pinner: uv_thread_join: %s", uv_strerror(rc));
    p->on = false;
    pinner_drain(p); /* what they release now goes at once (pinner_on: false) */
    if (p->pending)
        log_error("pinner: %llu jobs unfinished at shutdown", (unsigned long long)p->pending);
    if (p->async_on) {
        uvx_close((uv_handle_t *)&p->async, NULL);
        p->async_on = false;
    }
    uv_cond_destroy(&p->cv);
    uv_mutex_destroy(&p->mu);
}
