import Foundation
import HTTPServer
import Synchronization

/// Token buckets by key (a client address, a phone_id): `capacity` requests at once, refilled at
/// `refillPerSecond`. In memory, per process: the limits that must hold across restarts and instances
/// (OTP attempts, sends per number) are kept in the store instead.
public final class RateLimiter: Sendable {
    public let capacity: Double
    public let refillPerSecond: Double
    private let clock: PixieClock
    private let buckets = Mutex<[String: (tokens: Double, updated: Date)]>([:])
    /// Buckets kept at most; when full, the ones that have refilled completely are dropped first.
    private let maximumKeys: Int

    public init(capacity: Int, per interval: TimeInterval, clock: PixieClock, maximumKeys: Int = 100_000) {
        precondition(capacity > 0 && interval > 0, "a rate limit needs a capacity and an interval above 0")
        self.capacity = Double(capacity)
        self.refillPerSecond = Double(capacity) / interval
        self.clock = clock
        self.maximumKeys = maximumKeys
    }

    /// Takes one token for `key`; returns nil when allowed, or the seconds until a token is back.
    public func acquire(_ key: String) -> TimeInterval? {
        let now = clock.now()
        return buckets.withLock { buckets in
            if buckets.count >= maximumKeys, buckets[key] == nil { prune(&buckets, now: now) }
            var bucket = buckets[key] ?? (capacity, now)
            let elapsed = max(0, now.timeIntervalSince(bucket.updated))
            bucket.tokens = min(capacity, bucket.tokens + elapsed * refillPerSecond)
            bucket.updated = now
            defer { buckets[key] = bucket }
            guard bucket.tokens >= 1 else { return (1 - bucket.tokens) / refillPerSecond }
            bucket.tokens -= 1
            return nil
        }
    }

    /// Takes one token for the request's client address, or throws the 429 (`rate_limited`, `Retry-After`)
    /// every service answers when a client is over its limit.
    func admit(_ request: HTTPRequest) throws(HTTPError) {
        if let wait = acquire(request.clientKey) {
            throw HTTPError(
                .tooManyRequests, .rateLimited, "too many requests from this address; wait and try again",
                headers: ["Retry-After": String(Int(wait.rounded(.up)))])
        }
    }

    private func prune(_ buckets: inout [String: (tokens: Double, updated: Date)], now: Date) {
        let full = capacity / refillPerSecond
        buckets = buckets.filter { now.timeIntervalSince($0.value.updated) < full }
        if buckets.count >= maximumKeys { buckets.removeAll() }
    }
}
