import Foundation
import PixieWire
import SiblingsCrypto
import Transparency

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A transparency log read over identity-svc's HTTP endpoints (`/v1/kt/...`), for the auditor
/// (`pixie-server audit`) and for devices. Every answer is parsed strictly; anything unexpected is an error
/// naming the endpoint, never a default.
public struct HTTPLogSource: LogSource {
    /// GETs a path with its query (`/v1/kt/checkpoints?after=0`) and returns the status and the body.
    public typealias Fetch = @Sendable (String) async throws -> (status: Int, body: Data)

    public let logKey: LogKey
    private let fetch: Fetch

    public init(logKey: LogKey, fetch: @escaping Fetch) {
        self.logKey = logKey
        self.fetch = fetch
    }

    /// Reads the server at `baseURL` (`http://127.0.0.1:8080`) with URLSession. A request that has not
    /// finished, its whole answer read, within `timeout` seconds (``Foundation/URLSession/limited(to:)``)
    /// fails, naming the endpoint. A page of entries is up to 10,000 of them, some megabytes: allow a slow
    /// link its time.
    public init(baseURL: URL, logKey: LogKey, timeout: TimeInterval = 300) {
        let session = URLSession.limited(to: timeout)
        let limit = Int(session.configuration.timeoutIntervalForResource)
        self.init(logKey: logKey) { path in
            guard let url = URL(string: path, relativeTo: baseURL) else {
                throw ServerError(.upstream, "cannot form a URL from \(baseURL) and \(path)")
            }
            do {
                let (data, response) = try await session.data(from: url)
                return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
            } catch let error as URLError where error.code == .timedOut {
                throw ServerError(.upstream, "\(url.absoluteString) did not finish answering within \(limit) s")
            }
        }
    }

    public func checkpointSizes(after size: UInt64, limit: Int) async throws -> [UInt64] {
        let path = PixieAPI.ktCheckpointSizes.target(query: [("after", "\(size)"), ("limit", "\(limit)")])
        return try await json(TransparencyAPI.SizesResponse.self, path).sizes
    }

    public func checkpoint(size: UInt64) async throws -> Checkpoint {
        let path = PixieAPI.ktCheckpoint.target(query: [("size", "\(size)")])
        let note = String(decoding: try await get(path), as: UTF8.self)
        return try Checkpoint(note: note, verifyingWith: logKey)
    }

    public func entries(_ range: Range<UInt64>) async throws -> [Entry] {
        let path = PixieAPI.ktEntries.target(
            query: [("start", "\(range.lowerBound)"), ("end", "\(range.upperBound)")])
        return try await json(TransparencyAPI.EntriesResponse.self, path).entries.map { try Entry(encoded: $0.data) }
    }

    public func consistencyProof(from oldSize: UInt64, to newSize: UInt64) async throws -> ConsistencyProof {
        let path = PixieAPI.ktConsistency.target(query: [("from", "\(oldSize)"), ("to", "\(newSize)")])
        let proof = try await json(TransparencyAPI.ProofResponse.self, path).proof
        return try ConsistencyProof(encoded: proof.data)
    }

    private func get(_ path: String) async throws -> Data {
        let (status, body) = try await fetch(path)
        guard status == 200 else {
            throw ServerError(
                .upstream, "\(path) answered \(status): \(String(decoding: body.prefix(300), as: UTF8.self))")
        }
        return body
    }

    private func json<T: Decodable>(_ type: T.Type, _ path: String) async throws -> T {
        let body = try await get(path)
        do {
            return try JSONDecoder().decode(T.self, from: body)
        } catch {
            throw ServerError(.upstream, "\(path) did not answer the JSON the protocol describes: \(error)")
        }
    }
}
