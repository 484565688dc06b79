import Foundation
import HTTPServer
import PixieDevice

/// The device SDK's network straight into a server's ``HTTPResponder`` (pixie-server's Router), with no sockets:
/// each ``TransportRequest`` goes through ``HTTPResponder/test(_:_:headers:body:remoteAddress:)``, which answers
/// exactly as the server would (errors already turned into responses, streamed bodies collected).
///
/// For tests that run a device against the services in one process, on the server's manual clock, with a
/// middleware in front when the server is to misbehave. The relay is not carried here: such tests use the
/// in-memory relay (``InMemoryRelay``, DevicesInMemoryTests), or run the real binary.
public struct InProcessTransport: HTTPTransport {
    public let responder: any HTTPResponder
    /// The peer address the server sees (loopback, as a local device would be).
    public let remoteAddress: String

    public init(_ responder: any HTTPResponder, remoteAddress: String = "127.0.0.1") {
        self.responder = responder
        self.remoteAddress = remoteAddress
    }

    /// A piped body, read to its end (its producer runs on a thread of its own).
    static func drain(_ pipe: PipedBody) throws -> Data {
        let stream = pipe.inputStream()
        stream.open()
        defer { stream.close() }
        var body = Data()
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while stream.hasBytesAvailable {
            let count = stream.read(&buffer, maxLength: buffer.count)
            if count < 0 { throw PixieClientError.unreachable("the piped body failed while it was read") }
            if count == 0 { break }
            body.append(contentsOf: buffer[0..<count])
        }
        return body
    }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        var headers = HTTPHeaders()
        for (name, value) in request.headers.sorted(by: { $0.key < $1.key }) { headers.add(name, value) }
        // A piped body is read whole: these are tests, with small blobs.
        let body = try request.body ?? request.bodyPipe.map(Self.drain) ?? Data()
        if !body.isEmpty, headers["Content-Length"] == nil { headers["Content-Length"] = String(body.count) }
        let response = await responder.test(
            HTTPMethod(request.method), request.target, headers: headers, body: body, remoteAddress: remoteAddress)
        var answer: [String: String] = [:]
        for field in response.headers { answer[field.name.lowercased()] = field.value }
        return TransportResponse(status: response.status.code, headers: answer, body: response.body)
    }
}
