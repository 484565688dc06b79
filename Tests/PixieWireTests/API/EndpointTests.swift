import PixieWire
import Testing

@Suite("PixieAPI: one table of endpoints, its templates filled and matched")
struct EndpointTests {
    @Test("a path parameter is filled in, percent-encoded but for RFC 3986's unreserved characters")
    func templatesAreFilled() {
        #expect(
            PixieAPI.downloadBlob.target(["blob_id": "AAECAwQFBgcICQoLDA0ODw"]) == "/v1/blobs/AAECAwQFBgcICQoLDA0ODw")
        #expect(PixieAPI.ackBlob.target(["blob_id": "-._~09azAZ"]) == "/v1/blobs/-._~09azAZ")
        #expect(PixieAPI.ackBlob.target(["blob_id": "a/b c?d%e#"]) == "/v1/blobs/a%2Fb%20c%3Fd%25e%23")
        #expect(PixieAPI.downloadBlob.target(["blob_id": "é"]) == "/v1/blobs/%C3%A9")
        #expect(PixieAPI.downloadBlob.target(["blob_id": ""]) == "/v1/blobs/")
    }

    @Test("a path without parameters is itself, and a query follows it, encoded the same way")
    func queriesFollowThePath() {
        #expect(PixieAPI.siblings.target() == "/v1/sync/siblings")
        #expect(PixieAPI.relayConnect.target() == "/v1/relay")
        #expect(
            PixieAPI.ktCheckpointSizes.target(query: [("after", "0"), ("limit", "10")])
                == "/v1/kt/checkpoints?after=0&limit=10")
        #expect(PixieAPI.tokenKeys.target(query: [("class", "upload")]) == "/v1/tokens/keys?class=upload")
        #expect(PixieAPI.tokenKeys.target(query: [("a b", "c&d=e")]) == "/v1/tokens/keys?a%20b=c%26d%3De")
    }

    @Test("the router's pattern spells each parameter :name")
    func routePatterns() {
        #expect(PixieAPI.downloadBlob.routePattern == "/v1/blobs/:blob_id")
        #expect(PixieAPI.downloadBlob.parameterNames == ["blob_id"])
        #expect(PixieAPI.createAccount.routePattern == "/v1/accounts")
        #expect(PixieAPI.createAccount.parameterNames.isEmpty)
        let endpoint = PixieAPI.Endpoint<PixieAPI.NoBody, PixieAPI.RawBody>(
            name: "example", method: .get, path: "/v1/a/{first}/b/{second}", authorization: .open)
        #expect(endpoint.routePattern == "/v1/a/:first/b/:second")
        #expect(endpoint.parameterNames == ["first", "second"])
        #expect(endpoint.target(["second": "2", "first": "1"]) == "/v1/a/1/b/2")
        #expect(PixieAPI.AnyEndpoint(endpoint).routePattern == "/v1/a/:first/b/:second")
    }

    @Test("every endpoint is in the table once: by method and path, by route shape, and by name")
    func everyEndpointIsUnique() {
        let table = PixieAPI.all + PixieAPI.platform
        #expect(PixieAPI.all.count == 25)
        let keys = table.map(\.description)
        #expect(Set(keys).count == keys.count, "\(keys)")
        // Two templates that differ only in a parameter's name would be one route to the router.
        let shapes = table.map(Self.shape)
        #expect(Set(shapes).count == shapes.count, "\(shapes)")
        let names = table.map(\.name)
        #expect(Set(names).count == names.count, "\(names)")
    }

    /// `GET /v1/blobs/{}`: the method and path with every parameter's name left out.
    static func shape(_ endpoint: PixieAPI.AnyEndpoint) -> String {
        let segments = endpoint.path.split(separator: "/").map { segment -> String in
            segment.hasPrefix("{") ? "{}" : String(segment)
        }
        return "\(endpoint.method.rawValue) /\(segments.joined(separator: "/"))"
    }

    @Test("every path of the table is under /v1; the process's own are not")
    func everyPathIsVersioned() {
        for endpoint in PixieAPI.all {
            #expect(endpoint.path.hasPrefix("/v1/"), "\(endpoint)")
        }
        for endpoint in PixieAPI.platform {
            #expect(!endpoint.path.hasPrefix("/v1/"), "\(endpoint)")
        }
        #expect(PixieAPI.platform.map(\.description) == ["GET /healthz", "GET /metrics"])
    }

    @Test("a descriptor keeps what the server and the client both need")
    func descriptors() {
        let upload = PixieAPI.AnyEndpoint(PixieAPI.uploadBlob)
        #expect(upload.name == "uploadBlob")
        #expect(upload.method == .post)
        #expect(upload.path == "/v1/blobs")
        #expect(upload.authorization == .sessionOrPrivateTokens)
        #expect(upload.description == "POST /v1/blobs")
        #expect(PixieAPI.all.contains(upload))
        #expect(PixieAPI.revokeSession.authorization == .session)
        #expect(PixieAPI.ackBlob.method == .delete)
        #expect(PixieAPI.relayConnect.authorization == .perFrame)
    }

    @Test("only the endpoints that read the Authorization header name its schemes")
    func headerSchemes() {
        #expect(PixieAPI.Authorization.session.headerSchemes == Set(["bearer"]))
        #expect(PixieAPI.Authorization.sessionOrPrivateTokens.headerSchemes == Set(["bearer", "privateToken"]))
        let inBodyPathOrFrames: [PixieAPI.Authorization] = [
            .open, .phoneCert, .grant, .passkey, .capability, .perFrame,
        ]
        for authorization in inBodyPathOrFrames {
            #expect(authorization.headerSchemes.isEmpty, "\(authorization)")
        }
        let sessions = PixieAPI.all.filter { $0.authorization == .session }.map(\.name).sorted()
        #expect(
            sessions == [
                "mintGrant", "removeDevice", "revokeSession", "rotations", "senderCert", "sessionTokens", "siblings",
            ])
    }
}
