#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Calls `body`, a system call or C library function that fails with -1 (or another negative value) and sets
/// `errno`, again for as long as it fails with `EINTR`, and returns its first other result with `errno` as that
/// call left it.
///
/// A signal caught while a call such as `read(2)`, `write(2)`, `recv(2)`, `send(2)`, `accept(2)`, `poll(2)`,
/// `flock(2)` or `waitpid(2)` blocks may end the call early with `EINTR` though nothing went wrong, and the call is
/// then made again (POSIX.1-2024, XSH 2.4, "Signal Concepts"; signal(7), "Interruption of system calls and library
/// functions by signal handlers"). This is that loop, written once, as swift-nio's `syscall(blocking:where:_:)`
/// has it.
///
/// Only the interruption is handled here: any other failure (`EAGAIN` on a non-blocking socket, `EBADF`, ...) is
/// returned for the caller to read `errno` and say what failed, and a short read or write is returned for the
/// caller to go on with the rest.
///
/// ```swift
/// let count = retryingInterrupts { read(descriptor, buffer.baseAddress, buffer.count) }
/// guard count >= 0 else { throw MyError("cannot read \(path): \(String(cString: strerror(errno)))") }
/// ```
///
/// - Parameter body: makes the call, and nothing else that could change `errno` after it; called once more for
///   each `EINTR`.
/// - Returns: what `body` returned the first time it did not fail with `EINTR`.
@inlinable
public func retryingInterrupts<Value: FixedWidthInteger>(_ body: () -> Value) -> Value {
    while true {
        let result = body()
        if result < 0 && errno == EINTR { continue }
        return result
    }
}
