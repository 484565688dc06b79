import Dispatch

/// Where responders run: a task executor on Dispatch threads of its own, not Swift's cooperative pool.
///
/// The pool has one thread per core and never grows; a process that also runs blocking work on it
/// (a test suite, a service calling a blocking library) can occupy every pool thread, and a request
/// whose responder waited for one would stall until a pool thread came free. A concurrent Dispatch
/// queue can add threads when others block, so requests keep being answered.
final class ResponderExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked: the queue is itself thread-safe and never changes.
    static let shared = ResponderExecutor()

    private let queue = DispatchQueue(label: "HTTPServer.responders", attributes: .concurrent)

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}
