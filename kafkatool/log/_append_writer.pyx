# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The append writer's native core: one thread writing segment bytes without the GIL.

Compiled by tools/build_accel.py (kafkatool.accel.NATIVE); without the binary,
kafkatool/log/append_writer.py runs its synchronous core with the same interface.

Items are (fd, tag, buffer, position), written in submission order (FIFO).  ``submit`` holds
the buffer (PyObject_GetBuffer: the exporter, e.g. a pooled frame bytearray, stays referenced and
unresizable) until ``collect`` releases it on the submitting thread, after the write.  Sequence
numbers: ``submitted`` (last given out), ``completed`` (last written, or failed), ``released``
(last collected).  A failed write records its errno in its item and its tag as failed: every
later item of that tag fails with the same errno without being written (no hole-crossing
write is ever acknowledged).  The thread signals an eventfd when something completed and the
reader asked for (``arm``: once the first write someone awaits is done), not per item, and
after every failed write (whoever waits: the loop collects and reports it).

Threads: ``submit`` and ``collect`` on one thread (the event loop's); ``wait`` on any thread
(it takes no GIL while it waits); ``run`` on the writer thread (it holds no GIL while it runs).
"""

from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memset
from libc.errno cimport errno, EINTR, EIO
from posix.unistd cimport pwrite, write
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE

cdef extern from "pthread.h" nogil:
    ctypedef struct pthread_mutex_t:
        pass
    ctypedef struct pthread_cond_t:
        pass
    int pthread_mutex_init(pthread_mutex_t*, void*)
    int pthread_mutex_destroy(pthread_mutex_t*)
    int pthread_mutex_lock(pthread_mutex_t*)
    int pthread_mutex_unlock(pthread_mutex_t*)
    int pthread_cond_init(pthread_cond_t*, void*)
    int pthread_cond_destroy(pthread_cond_t*)
    int pthread_cond_wait(pthread_cond_t*, pthread_mutex_t*)
    int pthread_cond_signal(pthread_cond_t*)
    int pthread_cond_broadcast(pthread_cond_t*)


cdef struct Item:
    int fd
    int err
    long long tag
    long long pos
    Py_buffer view


cdef int write_fully(int fd, const char* buf, Py_ssize_t n, long long pos) noexcept nogil:
    """pwrite all of it (short writes go on, EINTR retried); 0 or the errno."""
    cdef Py_ssize_t done = 0
    cdef Py_ssize_t w
    while done < n:
        w = pwrite(fd, buf + done, n - done, pos + done)
        if w < 0:
            if errno == EINTR:
                continue
            return errno if errno != 0 else EIO
        if w == 0:
            return EIO  # no progress: never loop forever
        done += w
    return 0


cdef class WriterCore:
    cdef pthread_mutex_t mu
    cdef pthread_cond_t work_cv
    cdef pthread_cond_t done_cv
    cdef Item* items
    cdef long long cap  # a power of two; seq s lives at items[s & (cap - 1)]
    cdef long long _submitted
    cdef long long _completed
    cdef long long _released
    cdef int efd
    cdef long long notify_at  # signal the eventfd once completed reaches it (0: nobody waits)
    cdef int stopping
    cdef int running
    cdef int held
    cdef long long* failed_tags
    cdef int* failed_errs
    cdef int n_failed
    cdef int cap_failed

    def __cinit__(self, int efd=-1, long long capacity=1024):
        cdef long long cap = 64
        while cap < capacity:
            cap <<= 1
        pthread_mutex_init(&self.mu, NULL)
        pthread_cond_init(&self.work_cv, NULL)
        pthread_cond_init(&self.done_cv, NULL)
        self.items = <Item*>malloc(cap * sizeof(Item))
        if self.items == NULL:
            raise MemoryError()
        memset(self.items, 0, cap * sizeof(Item))
        self.cap = cap
        self._submitted = self._completed = self._released = 0
        self.efd = efd
        self.notify_at = 0
        self.stopping = 0
        self.running = 0
        self.held = 0
        self.failed_tags = NULL
        self.failed_errs = NULL
        self.n_failed = self.cap_failed = 0

    def __dealloc__(self):
        cdef long long s
        # buffers still held (a core dropped without collect): released here, with the GIL
        if self.items != NULL:
            s = self._released + 1
            while s <= self._submitted:
                PyBuffer_Release(&self.items[s & (self.cap - 1)].view)
                s += 1
            free(self.items)
        free(self.failed_tags)
        free(self.failed_errs)
        pthread_cond_destroy(&self.work_cv)
        pthread_cond_destroy(&self.done_cv)
        pthread_mutex_destroy(&self.mu)

    @property
    def submitted(self):
        return self._submitted

    @property
    def completed(self):
        cdef long long c
        pthread_mutex_lock(&self.mu)
        c = self._completed
        pthread_mutex_unlock(&self.mu)
        return c

    @property
    def released(self):
        return self._released

    cdef int _grow(self) except -1:
        # under the mutex: the live items (released, submitted] move to a ring twice the size
        cdef long long ncap = self.cap * 2
        cdef Item* nitems = <Item*>malloc(ncap * sizeof(Item))
        cdef long long s
        if nitems == NULL:
            raise MemoryError()
        s = self._released + 1
        while s <= self._submitted:
            nitems[s & (ncap - 1)] = self.items[s & (self.cap - 1)]
            s += 1
        free(self.items)
        self.items = nitems
        self.cap = ncap
        return 0

    def submit(self, int fd, long long tag, object data, long long position):
        """Queue a write of ``data`` (any contiguous buffer) at ``position``; its sequence number."""
        cdef Py_buffer view
        cdef long long seq
        cdef Item* it
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        pthread_mutex_lock(&self.mu)
        if self.stopping:
            pthread_mutex_unlock(&self.mu)
            PyBuffer_Release(&view)
            raise RuntimeError("the append writer is stopped")
        if self._submitted - self._released >= self.cap:
            try:
                self._grow()
            except MemoryError:
                pthread_mutex_unlock(&self.mu)
                PyBuffer_Release(&view)
                raise
        self._submitted += 1
        seq = self._submitted
        it = &self.items[seq & (self.cap - 1)]
        it.fd = fd
        it.err = 0
        it.tag = tag
        it.pos = position
        it.view = view
        pthread_cond_signal(&self.work_cv)
        pthread_mutex_unlock(&self.mu)
        return seq

    cdef int _failed_errno(self, long long tag) noexcept nogil:
        cdef int i
        for i in range(self.n_failed):
            if self.failed_tags[i] == tag:
                return self.failed_errs[i]
        return 0

    cdef void _mark_failed(self, long long tag, int err) noexcept nogil:
        cdef long long* nt
        cdef int* ne
        if self._failed_errno(tag):
            return
        if self.n_failed == self.cap_failed:
            nt = <long long*>realloc(self.failed_tags, (self.cap_failed * 2 + 8) * sizeof(long long))
            if nt == NULL:
                return
            self.failed_tags = nt
            ne = <int*>realloc(self.failed_errs, (self.cap_failed * 2 + 8) * sizeof(int))
            if ne == NULL:
                return
            self.failed_errs = ne
            self.cap_failed = self.cap_failed * 2 + 8
        self.failed_tags[self.n_failed] = tag
        self.failed_errs[self.n_failed] = err
        self.n_failed += 1

    def run(self):
        """The writer thread's body: write items in order until stopped and drained."""
        cdef long long s
        cdef int fd, err, tell
        cdef long long tag, pos
        cdef const char* buf
        cdef Py_ssize_t n
        cdef unsigned long long one = 1
        with nogil:
            pthread_mutex_lock(&self.mu)
            self.running = 1
            while True:
                while (self._completed == self._submitted or self.held) and not self.stopping:
                    pthread_cond_wait(&self.work_cv, &self.mu)
                if self._completed == self._submitted:
                    break  # stopping, and nothing left
                s = self._completed + 1
                fd = self.items[s & (self.cap - 1)].fd
                tag = self.items[s & (self.cap - 1)].tag
                pos = self.items[s & (self.cap - 1)].pos
                buf = <const char*>self.items[s & (self.cap - 1)].view.buf
                n = self.items[s & (self.cap - 1)].view.len
                err = self._failed_errno(tag)
                pthread_mutex_unlock(&self.mu)
                if err == 0:
                    err = write_fully(fd, buf, n, pos)
                pthread_mutex_lock(&self.mu)
                if err:
                    self.items[s & (self.cap - 1)].err = err
                    self._mark_failed(tag, err)
                self._completed = s
                pthread_cond_broadcast(&self.done_cv)
                tell = self.notify_at != 0 and s >= self.notify_at
                if tell:
                    self.notify_at = 0
                if err:
                    tell = 1  # a failure is collected at once, awaited or not (the loop reports it)
                if tell and self.efd >= 0:
                    pthread_mutex_unlock(&self.mu)
                    write(self.efd, &one, 8)
                    pthread_mutex_lock(&self.mu)
            self.running = 0
            pthread_cond_broadcast(&self.done_cv)
            pthread_mutex_unlock(&self.mu)
            if self.efd >= 0:
                write(self.efd, &one, 8)

    def wait(self, long long seq, long long tag=0):
        """Wait (without the GIL) until item ``seq`` is written; then the errno of a failed
        write of ``tag`` (0: none).  -1: the writer is not running and never will write it."""
        cdef int err = 0
        with nogil:
            pthread_mutex_lock(&self.mu)
            while self._completed < seq and (self.running or not self.stopping):
                pthread_cond_wait(&self.done_cv, &self.mu)
            if self._completed < seq:
                err = -1
            elif tag:
                err = self._failed_errno(tag)
            pthread_mutex_unlock(&self.mu)
        return err

    def arm(self, long long seq):
        """Signal the eventfd once ``seq`` is written (0: disarm); False when it already is
        (no signal will come for it)."""
        cdef bint pending
        pthread_mutex_lock(&self.mu)
        pending = self._completed < seq
        self.notify_at = seq if pending else 0
        pthread_mutex_unlock(&self.mu)
        return pending

    def failed(self, long long tag):
        """The errno of ``tag``'s failed write, 0 if none."""
        cdef int err
        pthread_mutex_lock(&self.mu)
        err = self._failed_errno(tag)
        pthread_mutex_unlock(&self.mu)
        return err

    def collect(self):
        """(completed, [(seq, tag, errno) of each failed item]) of the items written since the
        last call, whose buffers are released now.  On the submitting thread."""
        cdef long long upto, s
        cdef Item* it
        failures = None
        pthread_mutex_lock(&self.mu)
        upto = self._completed
        pthread_mutex_unlock(&self.mu)
        s = self._released + 1
        while s <= upto:
            it = &self.items[s & (self.cap - 1)]
            if it.err:
                if failures is None:
                    failures = []
                failures.append((s, it.tag, it.err))
            PyBuffer_Release(&it.view)
            s += 1
        pthread_mutex_lock(&self.mu)
        self._released = upto
        pthread_mutex_unlock(&self.mu)
        return upto, failures

    def hold(self, bint held):
        """Tests: while held, no write starts (a stop still drains everything)."""
        pthread_mutex_lock(&self.mu)
        self.held = held
        pthread_cond_signal(&self.work_cv)
        pthread_mutex_unlock(&self.mu)

    def stop(self):
        """The thread ends once every item submitted is written (``run`` returns)."""
        pthread_mutex_lock(&self.mu)
        self.stopping = 1
        pthread_cond_signal(&self.work_cv)
        pthread_cond_broadcast(&self.done_cv)
        pthread_mutex_unlock(&self.mu)
