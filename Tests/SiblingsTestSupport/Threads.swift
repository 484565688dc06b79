import Foundation

/// Runs blocking work (a socket, a child process, a semaphore) on a thread of its own, off Swift's concurrency
/// pool: a test's in-process servers answer on threads that a blocked pool thread could be keeping them from.
public func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}
