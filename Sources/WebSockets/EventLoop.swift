internal import CEpoll
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// What waits in an ``EventLoop`` for its socket (a ``WebSocket``). Every call comes on the loop's thread.
package protocol EventLoopChannel: AnyObject {
    /// The socket has bytes, or the peer closed it, or it failed (`EPOLLIN`, `EPOLLRDHUP`, `EPOLLHUP`,
    /// `EPOLLERR`).
    func readable()
    /// The socket takes bytes again (`EPOLLOUT`, while asked for).
    func writable()
    /// A timer pass at `now`; returns when the channel next needs one, or nil.
    func timerFired(now: ContinuousClock.Instant) -> ContinuousClock.Instant?
}

/// A thread that waits in epoll(7) for many sockets at once: the WebSockets of the server and the client
/// live on a few of these instead of a thread each, so an idle connection costs memory, not a thread.
///
/// A channel is added, changed and removed on the loop's own thread (``execute(_:)`` hands work there from any
/// thread). Readiness is level-triggered. Timers are coarse: one pass over every channel when the earliest
/// deadline is due, never closer together than the smallest `timerSlack` a channel asked for (at most a
/// second), so ten thousand idle connections with a minute between pings cost one short scan a second.
package final class EventLoop: @unchecked Sendable {
    // @unchecked: `thread` is set once, before the loop runs; `channels`, `nextTag`, `timerDue`, `lastPass`,
    // `slack` and `readBuffer` are touched on the loop's thread only; other threads reach the loop through `inbox`
    // (a Mutex) and the eventfd.

    /// The process's loops, started on first use (a server's start, or a client's first connect): one per
    /// core, at least 2 (a consumer that blocks a moment holds up only the sockets on its loop) and at most 8.
    /// Empty if the system refused an epoll instance or an eventfd (out of descriptors); then nothing that
    /// needs them starts.
    package static let all: [EventLoop] = {
        let count = Swift.max(2, Swift.min(8, ProcessInfo.processInfo.activeProcessorCount))
        let loops = (0..<count).compactMap { EventLoop(index: $0) }
        return loops.count == count ? loops : []
    }()

    /// Why the loops could not be started, or nil when they run.
    package static var unavailable: String? {
        all.isEmpty
            ? "could not create the WebSocket event loops (epoll_create1 or eventfd failed); raise the open-file "
                + "limit (ulimit -n)" : nil
    }
    private static let turn = Atomic(0)

    /// The loop for a new socket, in turn. Only after ``unavailable`` said nil (the server and the client check
    /// it before any socket is made).
    package static func next() -> EventLoop {
        precondition(!all.isEmpty, "a WebSocket was made although the event loops could not start")
        return all[turn.wrappingAdd(1, ordering: .relaxed).oldValue % all.count]
    }

    private let epoll: Int32
    private let wakeup: Int32
    private let inbox = Mutex<[@Sendable () -> Void]>([])
    private var channels: [UInt64: any EventLoopChannel] = [:]
    /// Tag 0 is the eventfd.
    private var nextTag: UInt64 = 1
    private var timerDue: ContinuousClock.Instant?
    private var lastPass = ContinuousClock.now
    private var slack = Duration.seconds(1)
    /// Where every read on this loop lands first (64 KiB), so an idle socket holds no read buffer of its own.
    package let readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
    /// The loop's thread, set once before it runs anything.
    private var thread: Thread?

    private init?(index: Int) {
        epoll = CEpoll_create()
        wakeup = CEpoll_wakeup_create()
        guard epoll >= 0, wakeup >= 0, CEpoll_watch(epoll, wakeup, 1, CEpoll_IN, 0) == 0 else {
            if epoll >= 0 { close(epoll) }
            if wakeup >= 0 { close(wakeup) }
            readBuffer.deallocate()
            return nil
        }
        let thread = Thread { [self] in run() }
        thread.name = "websocket-loop-\(index)"
        self.thread = thread
        thread.start()
    }

    /// Whether the caller runs on this loop's thread: work that would wait for the loop does it in place instead
    /// (a wait there would wait for itself).
    package var isCurrent: Bool { Thread.current === thread }

    /// Runs `work` on the loop's thread, soon (after the events at hand).
    package func execute(_ work: @escaping @Sendable () -> Void) {
        let first = inbox.withLock { inbox -> Bool in
            inbox.append(work)
            return inbox.count == 1
        }
        // A full eventfd counter (never, at 2^64 - 2) or EAGAIN still leaves the loop awake.
        if first { _ = CEpoll_wake(wakeup) }
    }

    // MARK: On the loop's thread

    /// Watches `fd` for `channel`; returns its tag, or nil with errno set if epoll refused it.
    package func add(
        _ channel: any EventLoopChannel, fd: Int32, reading: Bool, writing: Bool, timerSlack: Duration
    )
        -> UInt64?
    {
        let tag = nextTag
        guard CEpoll_watch(epoll, fd, 1, Self.events(reading: reading, writing: writing), tag) == 0 else { return nil }
        nextTag += 1
        channels[tag] = channel
        slack = Swift.min(slack, Swift.max(timerSlack, .milliseconds(1)))
        return tag
    }

    /// Changes what `fd` is watched for. While not reading, the peer's half-close is not watched either (it
    /// would be reported ready for as long as the bytes before it wait); a hang-up and errors always are.
    package func watch(_ tag: UInt64, fd: Int32, reading: Bool, writing: Bool) {
        // Fails only for a descriptor no longer watched, which the channel's own state rules out.
        _ = CEpoll_watch(epoll, fd, 0, Self.events(reading: reading, writing: writing), tag)
    }

    /// Stops watching `fd` but keeps the channel, for its timers (a socket whose peer is gone).
    package func unwatch(_ tag: UInt64, fd: Int32) {
        _ = CEpoll_unwatch(epoll, fd)
    }

    /// Watches again a descriptor ``unwatch(_:fd:)`` took out, for the same channel and tag.
    package func rewatch(_ tag: UInt64, fd: Int32, reading: Bool, writing: Bool) {
        // Fails only for a descriptor already closed, which the channel's own state rules out.
        _ = CEpoll_watch(epoll, fd, 1, Self.events(reading: reading, writing: writing), tag)
    }

    /// Stops watching `fd`; call before closing it.
    package func remove(_ tag: UInt64, fd: Int32) {
        _ = CEpoll_unwatch(epoll, fd)
        channels[tag] = nil
    }

    /// Asks for a timer pass at `instant` (or a little later, by the loop's slack).
    package func schedule(at instant: ContinuousClock.Instant) {
        let due = Swift.max(instant, lastPass + slack)
        if timerDue.map({ due < $0 }) ?? true { timerDue = due }
    }

    private static func events(reading: Bool, writing: Bool) -> UInt32 {
        (reading ? CEpoll_IN | CEpoll_RDHUP : 0) | (writing ? CEpoll_OUT : 0)
    }

    private func run() {
        let capacity = 256
        let tags = UnsafeMutablePointer<UInt64>.allocate(capacity: capacity)
        let ready = UnsafeMutablePointer<UInt32>.allocate(capacity: capacity)
        while true {
            var timeout: Int32 = -1
            if let due = timerDue {
                let left = ContinuousClock.now.duration(to: due)
                let (seconds, attoseconds) = left.components
                timeout =
                    left <= .zero
                    ? 0 : Int32(Swift.min(seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1, 60_000))
            }
            let count = CEpoll_wait(epoll, tags, ready, Int32(capacity), timeout)
            for index in 0..<Int(Swift.max(count, 0)) {
                let tag = tags[index]
                if tag == 0 {
                    _ = CEpoll_clear(wakeup)
                    continue
                }
                let events = ready[index]
                // A channel an earlier event in this batch removed is skipped (its descriptor may be reused).
                if events & CEpoll_OUT != 0, let channel = channels[tag] { channel.writable() }
                if events & (CEpoll_IN | CEpoll_RDHUP | CEpoll_HUP | CEpoll_ERR) != 0, let channel = channels[tag] {
                    channel.readable()
                }
            }
            let work = inbox.withLock { inbox -> [@Sendable () -> Void] in
                defer { inbox = [] }
                return inbox
            }
            for item in work { item() }
            if let due = timerDue, ContinuousClock.now >= due { passTimers() }
        }
    }

    private func passTimers() {
        let now = ContinuousClock.now
        lastPass = now
        timerDue = nil
        var next: ContinuousClock.Instant?
        for channel in Array(channels.values) {
            if let due = channel.timerFired(now: now) { next = Swift.min(next ?? due, due) }
        }
        if let next { schedule(at: next) }
    }
}
