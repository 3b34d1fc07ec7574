/* SPDX-License-Identifier: Apache-2.0 */
/* session_io.c - see session_io.h. */
#include "session_io.h"

#include "uvx.h"

/* ---- bulk bytes on the I/O threads (io_pool.h) ----
 * The rest of a payload of at least io_bulk_min bytes, once rx holds none
 * of it, is read by an I/O thread straight into its staging slot, and a
 * reply group that large is written by one; the loop meanwhile serves the
 * other sessions. A session's own reads wait for its payload (frames are
 * in order), and its replies for the group being written. */

/* Reading (re)starts, on the loop or an I/O thread. */
void session_reading_resumed(session *s)
{
    uint64_t now = uv_hrtime();
    s->rx_ns = now; /* a frame's stall counts from here */
    /* nor does the pause count against the frame's rate: a frame begun
     * while reading stopped (from bytes already read) counts from now */
    if (s->stop_ns && s->frame_ns)
        s->frame_ns = s->frame_ns > s->stop_ns ? now : s->frame_ns + (now - s->stop_ns);
    s->stop_ns = 0;
}

int session_io_level(const session *s)
{
    return s->priority - GPUQ_PRIO_LOW; /* the scheduler's level index */
}

bool session_io_reads(const session *s)
{
    return s->srv->io && s->io_on && s->rstate == RS_PAYLOAD && s->rx_off == s->rx_len &&
           s->payload_len - s->have >= s->srv->cfg.io_bulk_min;
}

/* io.rd's bytes since last counted: the session's byte counts and its
 * frame's clocks (session_sweep judges a stalled or slow frame by them). */
void session_io_count(session *s)
{
    uint64_t moved = atomic_load(&s->io.rd.moved), d = moved - s->io_rd_seen;
    uint64_t last = atomic_load(&s->io.rd.last_ns);
    if (!d)
        return;
    s->io_rd_seen = moved;
    s->srv->stats.bytes_in += d;
    s->bytes_in += d;
    s->frame_got += d;
    if (last > s->rx_ns)
        s->rx_ns = last;
    if (last > s->active_ns)
        s->active_ns = last;
}

void session_io_progress(session *s)
{
    if (io_busy(&s->io.rd))
        session_io_count(s);
}

bool session_io_writing(const session *s)
{
    return io_busy(&s->io.wr);
}

uint64_t session_write_backlog(session *s)
{
    uint64_t held = 0;
    for (unsigned i = 0; s->io_held && i < s->io_held_n; i++)
        held += s->io_held_bufs[i].len;
    return uvx_write_queue_size((uv_stream_t *)&s->pipe) + io_left(&s->io.wr) + held;
}
