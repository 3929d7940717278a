"""Site sync: a docs site's pages, read by its sitemap or a crawl, kept in step with it.

scope: which URLs are the site's, and each page's document source.
addresses: the SSRF guard every connection goes through.
fetch: the HTTP client (conditional GETs, bounded in bytes and time).
polite: robots.txt and the pace per host. sitemaps: the listing. content: what a
page is. records: what is remembered between syncs. engine: one sync of one
site. sinks: the local index, or the documents bucket. setup: from settings.
"""
