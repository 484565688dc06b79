import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension Process {
    /// Starts the process with no signal blocked.
    ///
    /// A child inherits the signal mask of the thread that spawns it, and the threads that run Swift's
    /// async code (where `ParsableCommand.run()` runs) block signals. A child started from there with
    /// plain `run()` never sees them: `openssl speed` waits forever for its SIGALRM, an editor ignores
    /// Ctrl-C. This unblocks every signal on the spawning thread for the spawn, then restores its mask.
    public func runWithSignalsUnblocked() throws {
        var empty = sigset_t()
        var previous = sigset_t()
        sigemptyset(&empty)
        pthread_sigmask(SIG_SETMASK, &empty, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        try run()
    }
}
