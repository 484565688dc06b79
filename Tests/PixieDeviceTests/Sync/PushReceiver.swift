import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A push provider's webhook for pixie-server's `relay_push_webhook_url`, on a loopback port: it records every
/// wake it is posted (its JSON body) and answers each with the status `answer` gives (the wake's index, from 0).
/// Plain sockets on a thread of its own, since this test target links no HTTP server.
final class PushReceiver: Sendable {
    let port: Int
    var url: String { "http://127.0.0.1:\(port)/push" }
    private let descriptor: Int32
    private let received = Mutex<[[String: String]]>([])
    private let answer: @Sendable (Int, [String: String]) -> Int

    init(answer: @escaping @Sendable (Int, [String: String]) -> Int) throws {
        self.answer = answer
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw Failure(description: "socket() failed: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
        }
        guard bound == 0, listen(descriptor, 16) == 0 else {
            close(descriptor)
            throw Failure(description: "the push receiver could not listen: errno \(errno)")
        }
        var actual = sockaddr_in()
        var actualLength = length
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &actualLength) }
        }
        self.descriptor = descriptor
        port = Int(UInt16(bigEndian: actual.sin_port))
        Thread.detachNewThread { [self] in serve() }
    }

    /// The wakes posted so far, oldest first: `subject`, `wake` and `push_token`.
    var wakes: [[String: String]] { received.withLock { $0 } }

    func stop() { shutdown(descriptor, Int32(SHUT_RDWR)) }

    private func serve() {
        while true {
            let connection = accept(descriptor, nil, nil)
            guard connection >= 0 else {
                close(descriptor)
                return
            }
            var request = Data()
            var buffer = [UInt8](repeating: 0, count: 4096)
            var body: Data?
            while body == nil {
                let count = read(connection, &buffer, buffer.count)
                guard count > 0 else { break }
                request.append(contentsOf: buffer[0..<count])
                body = Self.body(of: request)
            }
            let fields = (body.flatMap { try? JSONSerialization.jsonObject(with: $0) } as? [String: String]) ?? [:]
            let index = received.withLock { wakes in
                wakes.append(fields)
                return wakes.count - 1
            }
            let status = answer(index, fields)
            let response = "HTTP/1.1 \(status) Answer\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            _ = response.utf8CString.withUnsafeBufferPointer { write(connection, $0.baseAddress, $0.count - 1) }
            close(connection)
        }
    }

    /// The body once the whole request is in (by its Content-Length), else nil.
    private static func body(of request: Data) -> Data? {
        guard let end = request.range(of: Data("\r\n\r\n".utf8)) else { return nil }
        let head = String(decoding: request[..<end.lowerBound], as: UTF8.self).lowercased()
        let length =
            head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
            .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
        let body = request[end.upperBound...]
        return body.count >= length ? Data(body.prefix(length)) : nil
    }
}
