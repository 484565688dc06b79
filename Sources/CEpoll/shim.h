#ifndef SIBLINGS_CEPOLL_SHIM_H
#define SIBLINGS_CEPOLL_SHIM_H

// Linux's epoll(7) and eventfd(2), which Swift's Glibc module does not include. `struct epoll_event` is
// packed on x86_64, so Swift never touches it: these wrappers take and fill plain values instead.

#include <errno.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

static const uint32_t CEpoll_IN = EPOLLIN;
static const uint32_t CEpoll_OUT = EPOLLOUT;
static const uint32_t CEpoll_RDHUP = EPOLLRDHUP;
static const uint32_t CEpoll_HUP = EPOLLHUP;
static const uint32_t CEpoll_ERR = EPOLLERR;
static const uint32_t CEpoll_ET = EPOLLET;

/// A new epoll instance, closed on exec; -1 with errno on failure.
static inline int CEpoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

/// An eventfd for waking a loop (non-blocking, closed on exec); -1 with errno on failure.
static inline int CEpoll_wakeup_create(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

/// Adds `fd` (`add` != 0) or changes its interest to `events`, tagged with `tag`; epoll_ctl's result.
static inline int CEpoll_watch(int epoll, int fd, int add, uint32_t events, uint64_t tag) {
    struct epoll_event event;
    event.events = events;
    event.data.u64 = tag;
    return epoll_ctl(epoll, add ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd, &event);
}

/// Stops watching `fd`; epoll_ctl's result.
static inline int CEpoll_unwatch(int epoll, int fd) {
    struct epoll_event event = {0};
    return epoll_ctl(epoll, EPOLL_CTL_DEL, fd, &event);
}

/// Waits up to `timeout_ms` (-1: for ever) for at most `capacity` events, written as parallel arrays of
/// tags and event bits; epoll_wait's result (the count, or -1 with errno).
static inline int CEpoll_wait(int epoll, uint64_t *tags, uint32_t *events, int capacity, int timeout_ms) {
    struct epoll_event ready[256];
    if (capacity > 256) capacity = 256;
    int count = epoll_wait(epoll, ready, capacity, timeout_ms);
    for (int i = 0; i < count; i++) {
        tags[i] = ready[i].data.u64;
        events[i] = ready[i].events;
    }
    return count;
}

/// Wakes a loop waiting in CEpoll_wait on `fd` (an eventfd); write(2)'s result.
static inline int CEpoll_wake(int fd) {
    uint64_t one = 1;
    return (int)write(fd, &one, sizeof one);
}

/// Clears an eventfd after a wakeup; read(2)'s result.
static inline int CEpoll_clear(int fd) {
    uint64_t value;
    return (int)read(fd, &value, sizeof value);
}

#endif
