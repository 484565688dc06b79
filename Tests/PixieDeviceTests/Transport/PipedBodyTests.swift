import Foundation
import PixieDevice
import Testing

@Suite("PipedBody: a body made while it is sent, bounded in between")
struct PipedBodyTests {
    /// Reads `stream` to its end, as URLSession does.
    static func readAll(_ stream: InputStream, chunk: Int = 1000) -> (bytes: Data, failed: Bool) {
        stream.open()
        var bytes = Data()
        var buffer = [UInt8](repeating: 0, count: chunk)
        while stream.hasBytesAvailable {
            let count = stream.read(&buffer, maxLength: chunk)
            if count < 0 { return (bytes, true) }
            if count == 0 { break }
            bytes.append(contentsOf: buffer[0..<count])
        }
        stream.close()
        return (bytes, false)
    }

    @Test(
        "what the producer writes arrives whole and in order, and the producer never runs ahead by more than the capacity"
    )
    func bounded() async throws {
        let pipe = PipedBody(capacity: 4096)
        let pieces = (0..<64).map { index in Data(repeating: UInt8(index), count: 1024) }
        let aheadMost = Shared<UInt64>(0)
        let read = Shared<UInt64>(0)
        let producing = Thread {
            for piece in pieces {
                try? pipe.write(piece)
                let ahead = pipe.byteCount - read.get()
                aheadMost.change { $0 = max($0, ahead) }
            }
            pipe.finish()
        }
        producing.start()
        let received: Data = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                let stream = pipe.inputStream()
                stream.open()
                var bytes = Data()
                var buffer = [UInt8](repeating: 0, count: 700)
                while stream.hasBytesAvailable {
                    let count = stream.read(&buffer, maxLength: buffer.count)
                    if count <= 0 { break }
                    bytes.append(contentsOf: buffer[0..<count])
                    read.change { $0 += UInt64(count) }
                    usleep(200)
                }
                continuation.resume(returning: bytes)
            }
        }
        #expect(received == pieces.reduce(Data(), +))
        // The buffer holds at most its capacity plus the piece being written (and the reader has one read in hand).
        #expect(aheadMost.get() <= 4096 + 1024 + 700, "\(aheadMost.get())")
    }

    @Test("a producer waiting on a full pipe is let go once the reader stops, and a failed producer fails the read")
    func failures() async throws {
        let pipe = PipedBody(capacity: 10)
        try pipe.write(Data(count: 10))
        let outcome: String = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                do {
                    try pipe.write(Data(count: 1))  // waits: the pipe is full
                    continuation.resume(returning: "written")
                } catch {
                    continuation.resume(returning: "\(error)")
                }
            }
            Thread.detachNewThread {
                usleep(50_000)
                let stream = pipe.inputStream()
                stream.open()
                stream.close()  // the transport gave up
            }
        }
        #expect(outcome == PipedBodyError.readerGone.description)

        struct Broke: Error {}
        let failing = PipedBody()
        try failing.write(Data("first".utf8))
        failing.fail(Broke())
        let (_, failed) = Self.readAll(failing.inputStream())
        #expect(failed)
    }
}
