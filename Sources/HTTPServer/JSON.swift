import Foundation

extension HTTPRequest {
    /// The body decoded as JSON into `type`, or a 400 ``HTTPError/Code/invalidJSON`` whose reason names the
    /// field that is missing, null or of the wrong type (`devices[2].id`), or says the body is not JSON.
    ///
    /// The body must be sent as `Content-Type: application/json` (parameters such as `charset=utf-8` are
    /// allowed), else 415 ``HTTPError/Code/unsupportedMediaType``: a browser may send a cross-origin
    /// `text/plain` or form POST without asking first (a CORS "simple" request), never an
    /// `application/json` one, so a page on another site cannot post to a JSON route.
    public func decode<T: Decodable>(
        as type: T.Type = T.self, decoder: JSONDecoder = JSONDecoder()
    )
        throws(HTTPError) -> T
    {
        guard Self.isJSON(headers["Content-Type"]) else {
            throw HTTPError(
                .unsupportedMediaType, .unsupportedMediaType,
                "send the body as JSON with the header Content-Type: application/json")
        }
        guard !body.isEmpty else {
            throw HTTPError(.badRequest, .invalidJSON, "the body is empty; send a JSON value")
        }
        do {
            return try decoder.decode(T.self, from: body)
        } catch let error as DecodingError {
            throw HTTPError(.badRequest, .invalidJSON, Self.reason(for: error))
        } catch {
            throw HTTPError(.badRequest, .invalidJSON, "the body is not valid JSON")
        }
    }

    /// Whether a `Content-Type` value is `application/json`, case-insensitively, with any parameters.
    static func isJSON(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let mediaType = contentType.split(separator: ";", maxSplits: 1).first ?? ""
        return mediaType.trimmingCharacters(in: .whitespaces).lowercased() == "application/json"
    }

    private static func reason(for error: DecodingError) -> String {
        switch error {
        case .keyNotFound(let key, let context):
            return "missing field '\(path(context.codingPath + [key]))'"
        case .valueNotFound(_, let context):
            return "field '\(path(context.codingPath))' must not be null"
        case .typeMismatch(let type, let context):
            let field = context.codingPath.isEmpty ? "the body" : "field '\(path(context.codingPath))'"
            return "\(field) must be \(describe(type))"
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty { return "the body is not valid JSON" }
            return "field '\(path(context.codingPath))' is invalid: \(context.debugDescription)"
        @unknown default:
            return "the body is not the JSON this route expects"
        }
    }

    /// `a.b[2].c`
    private static func path(_ codingPath: [any CodingKey]) -> String {
        var text = ""
        for key in codingPath {
            if let index = key.intValue {
                text += "[\(index)]"
            } else {
                text += text.isEmpty ? key.stringValue : ".\(key.stringValue)"
            }
        }
        return text
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: return "a string"
        case is Bool.Type: return "a boolean"
        case is Int.Type, is Int64.Type, is Int32.Type, is UInt.Type, is UInt64.Type, is UInt32.Type:
            return "an integer"
        case is Double.Type, is Float.Type: return "a number"
        case is [Any].Type: return "an array"
        case is [String: Any].Type: return "an object"
        default: return "of type \(type)"
        }
    }
}

extension HTTPResponse {
    /// `value` encoded as JSON with `Content-Type: application/json`; without an `encoder`, keys are sorted.
    public static func json(
        _ value: some Encodable, status: Status = .ok, encoder: JSONEncoder? = nil
    ) throws(HTTPError) -> HTTPResponse {
        do {
            let body = try (encoder ?? .sortedKeys).encode(value)
            return HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: body)
        } catch {
            throw HTTPError(.internalServerError, .internalError, "the response could not be encoded as JSON")
        }
    }
}
