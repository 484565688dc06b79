import Foundation

/// A server's connection URL as logs and messages may show it: the password replaced, and whatever else in it can
/// be a secret (a user name that stands alone is a NATS token; libpq takes `password=` as a query parameter too).
///
/// Configuration values that can hold a secret (`database_url`, `relay_nats_url`) reach people and logs only
/// through this, never as given (docs/operations.md, "What the logs show").
public enum ConnectionURL {
    /// What stands in for a removed secret.
    public static let mask = "xxxxx"

    /// `url` with its secrets masked: `nats://alice:xxxxx@host:4222`, `nats://xxxxx@host:4222` (a token),
    /// `postgres://pixie:xxxxx@db/pixie?password=xxxxx`. A value that is not a URL at all is shown as
    /// `(a URL that does not parse)`, since any part of it could be the secret.
    public static func redacted(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.scheme != nil else {
            return "(a URL that does not parse)"
        }
        if components.password != nil {
            components.password = mask
        } else if components.user != nil {
            // A user with no password is how NATS (and some brokers) carry a token.
            components.user = mask
        }
        if let items = components.queryItems, !items.isEmpty {
            components.queryItems = items.map { item in
                let secret = ["password", "pass", "token", "sslpassword", "auth_token", "nkey", "secret"]
                    .contains(item.name.lowercased())
                return secret ? URLQueryItem(name: item.name, value: mask) : item
            }
        }
        return components.string ?? "(a URL that does not parse)"
    }
}
