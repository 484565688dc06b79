import Foundation
import HTTPServer

/// A webhook (`POST /hook`), or a log (`GET /v1/kt/checkpoints`), that takes each request and answers none
/// until ``stop()``, with no responder timeout of its own: a client that gets an answer before then can only
/// have given up by itself.
struct StalledGateway {
    private let server: HTTPServer
    private let release: AsyncStream<Void>.Continuation
    let url: URL

    init() throws {
        let (released, release) = AsyncStream<Void>.makeStream()
        var router = Router()
        let stall: Router.Handler = { _, _ in
            for await _ in released {}
            return HTTPResponse(status: .accepted)
        }
        router.post("/hook", use: stall)
        router.get("/v1/kt/checkpoints", use: stall)
        server = try HTTPServer(responder: router, configuration: HTTPServer.Configuration(responderTimeout: nil))
        self.release = release
        url = URL(string: "http://127.0.0.1:\(server.port)/hook")!
    }

    func stop() async {
        release.finish()
        await server.shutdown()
    }
}
