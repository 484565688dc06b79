import Foundation
import Synchronization
import SystemCalls

#if canImport(Glibc)
    import Glibc
    internal import CSpawn
#elseif canImport(Darwin)
    import Darwin
#endif

/// A child process, set up and run with the names Foundation's `Process` uses, but started so that it inherits
/// nothing it should not:
///
/// - **No descriptor but its standard input, output and error.** posix_spawn(3) closes every other one in the
///   child (`posix_spawn_file_actions_addclosefrom_np`, glibc 2.34; `POSIX_SPAWN_CLOEXEC_DEFAULT` on Darwin).
///   Foundation's `Process` on Linux closes only the descriptors it saw open just before it spawned, so a pipe
///   or socket another thread opens in between stays open in the child for the child's whole life. A reader
///   waiting for the end of that pipe, or a server waiting for that socket to close, then waits as long as the
///   child lives. (The test run hung that way: a PostgreSQL server that one test restarted held the write end
///   of another test's Python oracle's input, so the oracle never exited, and its test waited for ever.)
/// - **No blocked or ignored signal.** A child inherits the signal mask of the thread that spawns it, and the
///   threads that run Swift's async code block nearly every signal; a signal ignored here (SIGPIPE) stays
///   ignored across exec. The child starts with an empty mask and every signal at its default action, so
///   ``terminate()`` reaches it, `openssl speed` gets its SIGALRM, and an editor hears Ctrl-C.
///
/// The exit status is collected by ``waitUntilExit()`` (or ``waitUntilExit(timeout:)``), as with `Process`.
public final class ChildProcess: @unchecked Sendable {
    // @unchecked: the settings are written before run() by the thread that starts the child and only read
    // afterwards; the exit status, which any thread may ask for, is behind `status`.

    /// The program to run.
    public var executableURL: URL?
    /// Its arguments (after the program's path, which is `argv[0]`).
    public var arguments: [String]?
    /// Its whole environment; nil: this process's own.
    public var environment: [String: String]?
    /// Its working directory; nil: this process's own.
    public var currentDirectoryURL: URL?
    /// A `Pipe` (the child reads from it) or a `FileHandle`; nil: this process's own standard input.
    public var standardInput: Any?
    /// A `Pipe` (the child writes into it) or a `FileHandle`; nil: this process's own standard output.
    public var standardOutput: Any?
    /// A `Pipe` (the child writes into it) or a `FileHandle`; nil: this process's own standard error.
    public var standardError: Any?

    /// The child's process ID once ``run()`` has started it; 0 before.
    public private(set) var processIdentifier: Int32 = 0

    /// The raw status waitpid(2) gave, once the child is reaped. The child is reaped, and signalled, only while
    /// this is held: a signal never reaches a process ID that was reaped and perhaps reused.
    private let status = Mutex<Int32?>(nil)

    public init() {}

    /// The program's name, for errors.
    private var name: String { executableURL?.lastPathComponent ?? "the child process" }

    /// Starts the child. Throws ``ChildProcessError`` saying what was wrong: no program, a standard stream that
    /// is neither a `Pipe` nor a `FileHandle`, a program that cannot be executed, or a second start.
    ///
    /// A `Pipe`'s end that the child was given is closed here once the child has it, as `Process` does, so a
    /// read from the other end ends when the child (and nothing else) has closed it.
    public func run() throws {
        guard processIdentifier == 0 else {
            throw ChildProcessError("\(name) was started already; make a new ChildProcess to run it again")
        }
        guard let executableURL else { throw ChildProcessError("no executableURL: set the program to run") }
        let path = executableURL.path

        #if canImport(Darwin)
            var actions: posix_spawn_file_actions_t?
            var attributes: posix_spawnattr_t?
        #else
            var actions = posix_spawn_file_actions_t()
            var attributes = posix_spawnattr_t()
        #endif
        try check(posix_spawn_file_actions_init(&actions), "posix_spawn_file_actions_init")
        defer { posix_spawn_file_actions_destroy(&actions) }
        try check(posix_spawnattr_init(&attributes), "posix_spawnattr_init")
        defer { posix_spawnattr_destroy(&attributes) }

        // The three streams, then every other descriptor closed (the dup2 actions run first, in order). A source
        // among 0, 1 and 2 that goes elsewhere (standard error into this process's standard output) is copied
        // above 2 first, since an earlier dup2 may have replaced it by then.
        var givenToTheChild: [FileHandle] = []
        var copies: [Int32] = []
        defer { for copy in copies { close(copy) } }
        func dup2(_ source: Int32, _ target: Int32) throws {
            var source = source
            if source < 3, source != target {
                source = fcntl(source, F_DUPFD_CLOEXEC, 3)
                guard source >= 0 else { return try check(errno, "F_DUPFD_CLOEXEC") }
                copies.append(source)
            }
            try check(posix_spawn_file_actions_adddup2(&actions, source, target), "adddup2")
        }
        for (stream, target) in [(standardInput, Int32(0)), (standardOutput, 1), (standardError, 2)] {
            switch stream {
            case nil:
                continue
            case let pipe as Pipe:
                let end = target == 0 ? pipe.fileHandleForReading : pipe.fileHandleForWriting
                try dup2(end.fileDescriptor, target)
                if !givenToTheChild.contains(where: { $0 === end }) { givenToTheChild.append(end) }
            case let handle as FileHandle where handle === FileHandle.nullDevice:
                // Foundation's null device has no descriptor of its own.
                try check(
                    posix_spawn_file_actions_addopen(
                        &actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0),
                    "addopen /dev/null")
            case let handle as FileHandle:
                try dup2(handle.fileDescriptor, target)
            case let other?:
                throw ChildProcessError(
                    "standard stream \(target) of \(name) is a \(type(of: other)); give a Pipe or a FileHandle")
            }
        }
        var flags = Int32(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)
        #if canImport(Darwin)
            flags |= Int32(POSIX_SPAWN_CLOEXEC_DEFAULT)
        #else
            try check(posix_spawn_file_actions_addclosefrom_np(&actions, 3), "addclosefrom_np")
        #endif
        if let directory = currentDirectoryURL {
            try check(posix_spawn_file_actions_addchdir_np(&actions, directory.path), "addchdir_np")
        }
        var noSignal = sigset_t()
        var everySignal = sigset_t()
        sigemptyset(&noSignal)
        sigfillset(&everySignal)
        try check(posix_spawnattr_setsigmask(&attributes, &noSignal), "posix_spawnattr_setsigmask")
        try check(posix_spawnattr_setsigdefault(&attributes, &everySignal), "posix_spawnattr_setsigdefault")
        try check(posix_spawnattr_setflags(&attributes, Int16(flags)), "posix_spawnattr_setflags")

        let argv = ([path] + (arguments ?? [])).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { for pointer in envp ?? [] { free(pointer) } }
        var pid: pid_t = 0
        let result =
            envp.map { posix_spawn(&pid, path, &actions, &attributes, argv, $0) }
            ?? posix_spawn(&pid, path, &actions, &attributes, argv, environ)
        guard result == 0 else {
            throw ChildProcessError("could not start \(path): \(String(cString: strerror(result)))")
        }
        processIdentifier = pid
        for end in givenToTheChild { try? end.close() }
    }

    /// Whether the child has started and not exited yet.
    public var isRunning: Bool {
        guard processIdentifier > 0, status.withLock({ $0 }) == nil else { return false }
        return !reap(blocking: false)
    }

    /// Blocks until the child has exited, and collects its status. Returns at once if it was never started.
    public func waitUntilExit() {
        guard processIdentifier > 0, status.withLock({ $0 }) == nil else { return }
        _ = reap(blocking: true)
    }

    /// Waits for the child to exit (or only looks, unless `blocking`), and collects its status once it has;
    /// `true` once the status is collected. The wait leaves the child a zombie (WNOWAIT), so its process ID
    /// stays its own; it is reaped, and its status stored, under `status`'s lock, which ``send(_:)`` also holds.
    private func reap(blocking: Bool) -> Bool {
        var info = siginfo_t()
        let result = retryingInterrupts {
            waitid(P_PID, id_t(processIdentifier), &info, WEXITED | WNOWAIT | (blocking ? 0 : WNOHANG))
        }
        // si_pid stays 0 while the child runs (WNOHANG), and is its ID once it has exited (waitid(2)); a failure
        // (ECHILD) means it is reaped already.
        if result != 0 || blocking || Self.pid(of: info) != 0 {
            status.withLock { status in
                guard status == nil else { return }
                var raw: Int32 = 0
                // ECHILD: something other than this object reaped it, and the status is lost: it reads as
                // killed by SIGKILL.
                status = waitpid(processIdentifier, &raw, WNOHANG) == processIdentifier ? raw : SIGKILL
            }
        }
        return status.withLock { $0 } != nil
    }

    /// Waits at most `timeout` for the child to exit; `true` (its status collected) if it did.
    public func waitUntilExit(timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while isRunning {
            guard ContinuousClock.now < deadline else { return false }
            usleep(2_000)
        }
        waitUntilExit()
        return true
    }

    /// Sends SIGTERM.
    public func terminate() { send(SIGTERM) }
    /// Sends SIGINT.
    public func interrupt() { send(SIGINT) }
    /// Sends SIGKILL, which no child can catch, block or ignore.
    public func kill() { send(SIGKILL) }
    /// Sends SIGSTOP: the child stops where it is, as a device whose app was suspended.
    public func suspend() { send(SIGSTOP) }
    /// Sends SIGCONT: a suspended child goes on.
    public func resume() { send(SIGCONT) }
    /// Sends SIGHUP: a server reloads what it reloads (pixie-server, its TLS certificate).
    public func hangUp() { send(SIGHUP) }

    /// Sends `signal` to a child that is started and not yet reaped (whose process ID is not reused).
    private func send(_ signal: Int32) {
        guard processIdentifier > 0 else { return }
        status.withLock { status in
            guard status == nil else { return }
            #if canImport(Darwin)
                _ = Darwin.kill(processIdentifier, signal)
            #else
                _ = Glibc.kill(processIdentifier, signal)
            #endif
        }
    }

    /// The exit code, or the number of the signal that ended the child (``terminationReason`` says which).
    /// Only once the child has exited and ``waitUntilExit()`` (or ``isRunning``) has seen it.
    public var terminationStatus: Int32 {
        let raw = exitStatus()
        return raw & 0x7f == 0 ? (raw >> 8) & 0xff : raw & 0x7f
    }

    /// Whether the child exited or a signal ended it.
    public var terminationReason: Process.TerminationReason {
        exitStatus() & 0x7f == 0 ? .exit : .uncaughtSignal
    }

    private func exitStatus() -> Int32 {
        guard let raw = status.withLock({ $0 }) else {
            preconditionFailure("\(name) has not exited, or nobody waited for it: call waitUntilExit() first")
        }
        return raw
    }

    deinit {
        // A child nobody waited for is reaped when it exits, as Foundation's Process does, so that it does not
        // stay a zombie (which kill(pid, 0) would still find).
        let pid = processIdentifier
        if pid > 0, status.withLock({ $0 }) == nil {
            Thread.detachNewThread {
                var raw: Int32 = 0
                _ = retryingInterrupts { waitpid(pid, &raw, 0) }
            }
        }
    }

    private func check(_ result: Int32, _ call: String) throws {
        guard result == 0 else {
            throw ChildProcessError("could not start \(name): \(call) failed (\(String(cString: strerror(result))))")
        }
    }

    private static func pid(of info: siginfo_t) -> pid_t {
        #if canImport(Darwin)
            info.si_pid
        #else
            info._sifields._kill.si_pid
        #endif
    }
}

/// A child process could not be started; the message says what was wrong.
public struct ChildProcessError: Error, CustomStringConvertible, Sendable {
    public let description: String

    init(_ description: String) { self.description = description }
}
