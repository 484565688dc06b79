import Dispatch
import Foundation
import Synchronization
import WebSockets

/// How a route receives its request body. The server asks ``HTTPResponder/bodyPolicy(for:)`` when only
/// the request's head is in, before reading any of the body.
public enum HTTPBodyPolicy: Sendable, Equatable {
    /// Collected into ``HTTPRequest/body`` up to ``HTTPServer/Configuration/maximumBodySize``; longer is 413.
    case collect
    /// Handed to the handler as it arrives, in ``HTTPRequest/bodyStream``, up to `limit` bytes. A declared
    /// `Content-Length` past the limit is answered 413 before the handler runs; an undeclared (chunked) body
    /// that passes it makes the stream throw a 413 ``HTTPError`` and the client gets 413. The connection
    /// reads no faster than the handler consumes, so memory stays bounded whatever the body's size.
    case stream(limit: Int)
}

/// A request body as it arrives: `for try await chunk in stream { ... }`, chunks of any size, in order.
///
/// Iterate it once, from one task. It throws an ``HTTPError`` if the client disconnects before the end
/// (``HTTPError/Code/clientDisconnected``) or sends more than the route's limit
/// (``HTTPError/Code/contentTooLarge``), and `CancellationError` if the task is cancelled.
/// The server buffers at most about 1 MiB ahead of the handler; a handler that returns without reading
/// the rest makes the server discard it.
public final class HTTPBodyStream: AsyncSequence, Sendable {
    public typealias Element = Data

    let queue: HandoffQueue<Data>

    init(capacity: Int = 1 << 20) {
        queue = HandoffQueue(capacity: capacity) { $0.count }
    }

    /// A stream that already holds `body` in chunks of at most `chunkSize` bytes, for the in-memory client.
    init(preloaded body: Data, chunkSize: Int = 64 << 10) {
        queue = HandoffQueue(capacity: Int.max) { $0.count }
        var offset = body.startIndex
        while offset < body.endIndex {
            let end = body.index(offset, offsetBy: chunkSize, limitedBy: body.endIndex) ?? body.endIndex
            queue.put(Data(body[offset..<end]))
            offset = end
        }
        queue.finish()
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let queue: HandoffQueue<Data>

        public mutating func next() async throws -> Data? { try await queue.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(queue: queue) }

    /// Every remaining chunk joined (for small bodies and tests; a large body belongs in a file).
    public func collect(upTo maximum: Int) async throws -> Data {
        var data = Data()
        for try await chunk in self {
            guard data.count + chunk.count <= maximum else { throw HTTPError.tooLarge(limit: maximum) }
            data.append(chunk)
        }
        return data
    }
}

/// Where a streamed response's producer writes the body (``HTTPResponse/stream(status:headers:length:producer:)``).
public struct HTTPBodyWriter: Sendable {
    let sink: @Sendable (Data) async throws -> Void

    /// Sends `data` to the client, suspending while the client is slower than the producer. Throws
    /// ``HTTPError/Code/clientDisconnected`` once the client has gone; the producer should then stop.
    public func write(_ data: Data) async throws {
        guard !data.isEmpty else { return }
        try await sink(data)
    }
}

/// A bounded pipe from an async producer to libmicrohttpd's connection thread, which blocks in `read`
/// until bytes come (the content-reader callback of a streamed response).
final class ResponsePipe: Sendable {
    private struct State {
        var chunks: [Data] = []
        var offset = 0
        var queued = 0
        var finished: Result<Void, any Error>?
        var readerGone = false
        var producer: CheckedContinuation<Bool, any Error>?
        var readerWaiting = false
    }

    private let state = Mutex(State())
    private let dataReady = DispatchSemaphore(value: 0)
    private let capacity: Int

    init(capacity: Int = 1 << 20) { self.capacity = capacity }

    static func disconnected() -> HTTPError {
        HTTPError(.badRequest, .clientDisconnected, "the client disconnected before the response was sent")
    }

    private enum WriteStep {
        case stored(wakeReader: Bool)
        case gone
        case wait
    }

    /// Queues `data`, suspending while the pipe is full; throws once the client has gone.
    func write(_ data: Data) async throws {
        while true {
            try Task.checkCancellation()
            // true: stored; false: woken because the reader made room, so try again.
            let stored = try await withCheckedThrowingContinuation {
                (continuation: CheckedContinuation<Bool, any Error>) in
                let step = state.withLock { state -> WriteStep in
                    if state.readerGone || state.finished != nil { return .gone }
                    if state.queued == 0 || state.queued + data.count <= capacity {
                        state.chunks.append(data)
                        state.queued += data.count
                        defer { state.readerWaiting = false }
                        return .stored(wakeReader: state.readerWaiting)
                    }
                    state.producer = continuation
                    return .wait
                }
                switch step {
                case .stored(let wakeReader):
                    if wakeReader { dataReady.signal() }
                    continuation.resume(returning: true)
                case .gone: continuation.resume(throwing: Self.disconnected())
                case .wait: break
                }
            }
            if stored { return }
        }
    }

    enum ReadResult: Equatable {
        case bytes(Int)
        case end
        case failed
    }

    private enum ReadStep {
        case bytes(Int, producer: CheckedContinuation<Bool, any Error>?)
        case end(failed: Bool)
        case wait
    }

    /// Copies up to `count` bytes into `buffer`, blocking the calling thread until some are queued or the
    /// producer has finished.
    func read(into buffer: UnsafeMutableRawPointer, count: Int) -> ReadResult {
        while true {
            let step = state.withLock { state -> ReadStep in
                if let first = state.chunks.first {
                    let n = min(count, first.count - state.offset)
                    first.withUnsafeBytes { bytes in
                        buffer.copyMemory(from: bytes.baseAddress! + state.offset, byteCount: n)
                    }
                    state.offset += n
                    state.queued -= n
                    if state.offset == first.count {
                        state.chunks.removeFirst()
                        state.offset = 0
                    }
                    defer { state.producer = nil }
                    return .bytes(n, producer: state.producer)
                }
                if let finished = state.finished {
                    if case .failure = finished { return .end(failed: true) }
                    return .end(failed: false)
                }
                state.readerWaiting = true
                return .wait
            }
            switch step {
            case .bytes(let n, let producer):
                producer?.resume(returning: false)
                return .bytes(n)
            case .end(let failed): return failed ? .failed : .end
            case .wait: dataReady.wait()
            }
        }
    }

    func finish(throwing error: (any Error)?) {
        let wake = state.withLock { state -> Bool in
            guard state.finished == nil else { return false }
            state.finished = error.map { .failure($0) } ?? .success(())
            defer { state.readerWaiting = false }
            return state.readerWaiting
        }
        if wake { dataReady.signal() }
    }

    /// The client is gone (libmicrohttpd freed the response): the producer's next write throws.
    func readerGone() {
        let producer = state.withLock { state -> CheckedContinuation<Bool, any Error>? in
            state.readerGone = true
            state.chunks = []
            state.queued = 0
            defer { state.producer = nil }
            return state.producer
        }
        producer?.resume(throwing: Self.disconnected())
    }
}
