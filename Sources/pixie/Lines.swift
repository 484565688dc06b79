import Dispatch
import Foundation
import Synchronization

/// Standard input, one line at a time, read by a single thread for the whole process. A task waiting for a line
/// stops waiting when it is cancelled (a prompt dismissed because another device answered), and the next line
/// typed goes to whoever asks next, not to the prompt that is gone.
final class Lines: Sendable {
    static let standardInput = Lines()

    private struct State {
        var lines: [String] = []
        var ended = false
        var reading = false
        var waiter: (id: UInt64, continuation: CheckedContinuation<String?, Never>)?
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())

    /// Drops the lines typed so far and not read: what was typed for a prompt that is gone must not answer the
    /// next one.
    func discardTyped() { state.withLock { $0.lines.removeAll() } }

    /// The next line, or nil at the end of input or when the task is cancelled.
    func next() async -> String? {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        startReading()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                state.withLock { state in
                    if !state.lines.isEmpty {
                        continuation.resume(returning: state.lines.removeFirst())
                    } else if state.ended || Task.isCancelled {
                        continuation.resume(returning: nil)
                    } else {
                        state.waiter = (id, continuation)
                    }
                }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<String?, Never>? in
                guard let waiter = state.waiter, waiter.id == id else { return nil }
                state.waiter = nil
                return waiter.continuation
            }
            waiter?.resume(returning: nil)
        }
    }

    private func startReading() {
        let start = state.withLock { state -> Bool in
            defer { state.reading = true }
            return !state.reading
        }
        guard start else { return }
        Thread.detachNewThread { [self] in
            while true {
                let line = readLine()
                let waiter = state.withLock { state -> CheckedContinuation<String?, Never>? in
                    if let line { state.lines.append(line) } else { state.ended = true }
                    guard let waiter = state.waiter else { return nil }
                    state.waiter = nil
                    return waiter.continuation
                }
                if let waiter {
                    let next = state.withLock { state -> String? in
                        state.lines.isEmpty ? nil : state.lines.removeFirst()
                    }
                    waiter.resume(returning: next)
                }
                if line == nil { return }
            }
        }
    }
}
