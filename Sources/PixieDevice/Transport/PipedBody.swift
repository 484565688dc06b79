import Foundation

/// A request body made while it is sent: a producer writes pieces as it makes them (a sibling's snapshot, sealed
/// as it is exported), the transport reads them as the connection takes them, and about ``capacity`` bytes wait in
/// between (a write waits while the capacity is reached, so at most the capacity plus the piece being written), so
/// neither side ever holds the whole body. Sent with chunked transfer encoding (its length is not
/// known until the producer finishes).
///
/// Both sides block a thread while they wait (the producer on a full buffer, the reader on an empty one), so
/// neither may run on Swift's cooperative pool: the producer runs on a thread of its own, the reader is the
/// transport's (``SocketHTTPTransport`` gives each exchange a thread).
public final class PipedBody: @unchecked Sendable {
    /// How many bytes written and not yet read make a write wait.
    public let capacity: Int
    // Everything below is guarded by `condition`.
    private let condition = NSCondition()
    private var pieces: [Data] = []
    /// How much of the first piece has been read already.
    private var headOffset = 0
    private var buffered = 0
    private var finished = false
    private var failure: (any Error)?
    private var readerGone = false
    private var written: UInt64 = 0

    public init(capacity: Int = 4 << 20) {
        self.capacity = capacity
    }

    /// Hands `piece` to the reader, waiting while the buffer is full; throws ``PipedBodyError/readerGone`` once the
    /// transport stopped reading (the upload failed or was cut off), so the producer stops too.
    public func write(_ piece: Data) throws {
        guard !piece.isEmpty else { return }
        condition.lock()
        defer { condition.unlock() }
        while buffered >= capacity, !readerGone { condition.wait() }
        guard !readerGone else { throw PipedBodyError.readerGone }
        pieces.append(piece)
        buffered += piece.count
        written += UInt64(piece.count)
        condition.broadcast()
    }

    /// The body is complete.
    public func finish() {
        condition.lock()
        finished = true
        condition.broadcast()
        condition.unlock()
    }

    /// The producer failed: the reader sees a stream error, and the upload fails.
    public func fail(_ error: any Error) {
        condition.lock()
        failure = error
        finished = true
        condition.broadcast()
        condition.unlock()
    }

    /// Bytes written so far.
    public var byteCount: UInt64 {
        condition.lock()
        defer { condition.unlock() }
        return written
    }

    // MARK: the reader's side

    /// Copies up to `count` bytes into `buffer`, waiting until some are written: how many it copied, 0 at the end
    /// of the body, -1 if the producer failed.
    func read(into buffer: UnsafeMutablePointer<UInt8>, count: Int) -> Int {
        condition.lock()
        defer { condition.unlock() }
        while pieces.isEmpty, !finished { condition.wait() }
        if failure != nil { return -1 }
        guard let head = pieces.first else { return 0 }
        let start = head.startIndex + headOffset
        let end = min(head.endIndex, start + count)
        head.copyBytes(to: buffer, from: start..<end)
        let copied = end - start
        if end == head.endIndex {
            pieces.removeFirst()
            headOffset = 0
        } else {
            headOffset += copied
        }
        buffered -= copied
        condition.broadcast()
        return copied
    }

    /// Whether to read again: false only once the body is complete and read. A failed body says true, so that
    /// the next read reports the failure (URLSession takes "no bytes available" for the end of a good body).
    var mayHaveMore: Bool {
        condition.lock()
        defer { condition.unlock() }
        return failure != nil || !(finished && pieces.isEmpty)
    }

    /// The transport stopped reading: a producer waiting on a full buffer is let go with an error.
    func readerStopped() {
        condition.lock()
        readerGone = true
        condition.broadcast()
        condition.unlock()
    }

    /// The body as Foundation's InputStream, for an app's own transport (URLSession's `httpBodyStream`). Read it
    /// once.
    public func inputStream() -> InputStream { PipedBodyStream(self) }
}

extension PipedBody: Equatable {
    /// The same body (by identity).
    public static func == (lhs: PipedBody, rhs: PipedBody) -> Bool { lhs === rhs }
}

public enum PipedBodyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The transport stopped reading the body before it was complete.
    case readerGone

    public var description: String { "the upload stopped reading before the body was complete" }
}

/// ``PipedBody`` as an InputStream: `read` blocks until bytes come (URLSession reads it on its own thread).
private final class PipedBodyStream: InputStream {
    private let body: PipedBody
    private var status = Stream.Status.notOpen

    init(_ body: PipedBody) {
        self.body = body
        super.init(data: Data())
    }

    deinit { body.readerStopped() }

    override var streamStatus: Stream.Status { status }
    override var hasBytesAvailable: Bool { body.mayHaveMore }
    override func open() { status = .open }
    override func close() {
        status = .closed
        body.readerStopped()
    }

    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength length: Int) -> Int {
        let count = body.read(into: buffer, count: length)
        if count < 0 { status = .error } else if count == 0 { status = .atEnd }
        return count
    }

    override func getBuffer(
        _ buffer: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, length len: UnsafeMutablePointer<Int>
    ) -> Bool { false }
}
